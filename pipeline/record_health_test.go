package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

type snapSource struct {
	p atomic.Pointer[snapshot.Snapshot]
}

func (s *snapSource) Snapshot() *snapshot.Snapshot { return s.p.Load() }

// TestRecordHealth: every new snapshot is written once, snapshots without families (NVML
// not read yet) are not, and the recorder reports its count only after the source stopped.
func TestRecordHealth(t *testing.T) {
	src := &snapSource{}
	src.p.Store(&snapshot.Snapshot{}) // before the first collection
	var mu sync.Mutex
	var got []*snapshot.Snapshot
	ctx, cancel := context.WithCancel(context.Background())
	srcDone := make(chan struct{})
	done := recordHealth(ctx, src, 4*time.Millisecond, func(s *snapshot.Snapshot) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}, srcDone)
	fam := []snapshot.Family{{Desc: &snapshot.Desc{Name: "x"}, Samples: []snapshot.Sample{{Value: 1}}}}
	var want []*snapshot.Snapshot
	for range 5 {
		s := &snapshot.Snapshot{Time: time.Now(), Families: fam}
		want = append(want, s)
		src.p.Store(s)
		time.Sleep(20 * time.Millisecond) // several polls see the same snapshot
	}
	cancel()
	select {
	case <-done:
		t.Fatal("the recorder finished before the source stopped")
	case <-time.After(20 * time.Millisecond):
	}
	close(srcDone)
	if n := <-done; n != len(want) {
		t.Errorf("recorder counted %d snapshots, want %d", n, len(want))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("wrote %d snapshots, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("snapshot %d is not the source's %d-th", i, i)
		}
	}
}
