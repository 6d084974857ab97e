package health

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// TestXIDsPolledNotWaitedFor: the XID watch never blocks in NVML (every nvmlEventSetWait asks
// for no wait: a blocking one keeps a goroutine in a cgo call, which the Go runtime's monitor
// polls for), reads every queued event at each poll, and polls again on the timetable.
func TestXIDsPolledNotWaitedFor(t *testing.T) {
	srv, _ := newFakeServer(t)
	dev := srv.Devices[2]
	var mu sync.Mutex
	queue := []uint64{79, 79, 48}
	var waits []uint32
	empty := 0 // reads that found the queue empty: one a poll
	set := &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, ms)
			if len(queue) == 0 {
				empty++
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
			x := queue[0]
			queue = queue[1:]
			return nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: x}, nvml.SUCCESS
		},
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	src := New(srv, nil)
	started(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.watchXIDs(ctx); close(done) }()
	polls := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			e := empty
			mu.Unlock()
			if e >= n {
				return
			}
		}
		t.Fatalf("fewer than %d polls in 5 s", n)
	}
	count := func(xid string) float64 {
		src.Collect()
		v, _ := series(t, src.Snapshot(), "cupti_gpu_xid_errors_total", map[string]string{"gpu": "2", "xid": xid})
		return v
	}
	polls(1)
	if a, b := count("79"), count("48"); a != 2 || b != 1 {
		t.Errorf("after the first poll: xid 79 %v, 48 %v; want 2 and 1 (every queued event)", a, b)
	}
	mu.Lock()
	queue = append(queue, 13)
	mu.Unlock()
	polls(2)
	if v := count("13"); v != 1 {
		t.Errorf("xid 13 after the next poll: %v, want 1", v)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i, ms := range waits {
		if ms != 0 {
			t.Fatalf("read %d waited %d ms in NVML, want 0", i, ms)
		}
	}
}
