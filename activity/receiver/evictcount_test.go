package receiver

import (
	"bytes"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// Connections register on their own goroutines, so not in the order they were accepted: a
// silent connection accepted before a sender may register after the sender has said goodbye,
// and take the slot the sender freed without evicting anyone (e2e's TestHostileActivityClients
// saw 224 evictions instead of 225 so, one run in four on a 2-core machine). This plays that
// order step by step, without the accept loop: each eviction is counted when it happens,
// before the victim's goroutine runs (before, only when that goroutine ended), and once,
// however that goroutine ends.
func TestEvictionCountedOnceWhenRegisteredOutOfOrder(t *testing.T) {
	agg := activity.NewAggregator()
	s, err := NewServer(filepath.Join(t.TempDir(), "activity.sock"), agg, nil, WithMaxConnectionsPerIdentity(2))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evicted := func() float64 {
		return value(t, agg.Snapshot(), "cupti_activity_dropped_connections_total", "evicted_no_hello")
	}
	// One container: one cgroup, and the sender's pid and start time as the kernel gives them.
	sender := proc(7)
	sender.StartTime = uint64(time.Now().Add(-time.Minute).UnixNano())
	pe := peer{pid: 7, pinned: true, proc: procEntry{startTime: sender.StartTime, nspids: []uint32{7}, cgroup: "0::/pod/c"}}
	t0 := time.Now()
	register := func(name string, opened time.Duration) (*connState, net.Conn) {
		t.Helper()
		ours, theirs := net.Pipe()
		t.Cleanup(func() { theirs.Close() })
		cs, refusal := s.register(ours, pe, t0.Add(opened))
		if refusal != "" {
			t.Fatalf("%s refused: %s", name, refusal)
		}
		return cs, theirs
	}

	// Accepted in order a, b, c, sender; registered a, b, sender, then c.
	a, _ := register("a", 0)
	register("b", 1)
	cs, conn := register("sender", 3)
	if a.evicted.Load() == nil {
		t.Fatal("the sender's registration evicted no one; want a, the oldest silent connection")
	}
	if v := evicted(); v != 1 {
		t.Errorf("evicted_no_hello %g right after the eviction, want 1 (counted where it happens)", v)
	}
	// The sender says hello and goodbye before c registers.
	go func() {
		var b bytes.Buffer
		enc := wire.NewEncoder(&b)
		enc.Hello(sender)
		enc.Goodbye(0, wire.Drops{})
		conn.Write(b.Bytes())
	}()
	s.serveConn(cs)
	if !cs.hello.Load() || s.conns[cs.c] != nil {
		t.Fatal("the sender's hello was not accepted, or its connection not forgotten after its goodbye")
	}
	c, _ := register("c", 2) // the sender's slot: nobody to evict
	if c.id == nil || c.id.conns != 2 {
		t.Fatalf("c not registered as the container's second connection")
	}
	// a's goroutine runs at last: it meets its closed connection and must not count again.
	s.serveConn(a)
	if v := evicted(); v != 1 {
		t.Errorf("evicted_no_hello %g after the victim's goroutine ended, want 1", v)
	}
	var dropped float64
	for _, f := range agg.Snapshot().Families {
		if f.Desc.Name == "cupti_activity_dropped_connections_total" {
			for _, sm := range f.Samples {
				dropped += sm.Value
			}
		}
	}
	if dropped != 1 {
		t.Errorf("%g connection drops counted in all, want 1 (a's eviction)", dropped)
	}
}
