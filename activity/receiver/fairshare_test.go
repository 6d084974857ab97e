package receiver

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// cgroupOf is the cgroup of the i-th container of the slot tests.
func cgroupOf(i int) string {
	return fmt.Sprintf("0::/kubepods.slice/kubepods-pod%08d_2222_3333_4444_555555555555.slice/cri-containerd-%04d.scope", i, i)
}

// The lock-out: processes in 8 cgroups hold keep-alive connections (hello, then
// silence) up to their identity's limit of 32, which fills all 256 slots; a process of a
// ninth container was then refused (limit) and lost all its records. Now the newcomer takes
// a slot from the identity holding the most (evicted_fair_share).
func TestConnectionSlotsFairShare(t *testing.T) {
	const btime, ticks = 1_795_000_000, 42 // as moveTo writes them
	root := t.TempDir()
	srv, agg := startServer(t, WithProcRoot(root))
	hello := record.Process{PID: 7, StartTime: btime*1e9 + ticks*1e7, DeviceUUIDs: []string{"GPU-a"}}
	// Every connection of this test comes from this process: its /proc entry is rewritten with
	// the next container's cgroup once the previous container's connections are identified
	// (and the receiver's cache of this process's entry has expired: moveTo).
	var held []net.Conn
	for i := range DefaultMaxConnections / DefaultMaxConnectionsPerIdentity {
		moveTo(t, root, cgroupOf(i))
		for range DefaultMaxConnectionsPerIdentity {
			c := dial(t, srv.Path())
			if err := wire.NewEncoder(c).Hello(hello); err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		want := float64(len(held))
		waitFor(t, agg, "the keep-alive connections", func(s *snapshot.Snapshot) bool {
			return value(t, s, "cupti_activity_processes") == want
		})
	}
	moveTo(t, root, cgroupOf(99))
	c := dial(t, srv.Path())
	enc := wire.NewEncoder(c)
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Start: 1, End: 1001, Name: "_Z4realv"}
	}
	if err := errors.Join(enc.Hello(hello), enc.Records(0, recs), enc.Goodbye(1000, wire.Drops{})); err != nil {
		t.Logf("the newcomer's writes: %v", err) // refused: its records are lost
	}
	waitFor(t, agg, "the newcomer counted or refused", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_records_total", "kernel") == 1000 ||
			value(t, s, "cupti_activity_dropped_connections_total", "limit") > 0
	})
	s := agg.Snapshot()
	t.Logf("newcomer's records counted %g; refused (limit) %g, refused_connection records %g, evicted_fair_share %g",
		value(t, s, "cupti_activity_records_total", "kernel"), value(t, s, "cupti_activity_dropped_connections_total", "limit"),
		value(t, s, "cupti_activity_dropped_records_total", "refused_connection"),
		valueOr0(s, "cupti_activity_dropped_connections_total", "evicted_fair_share"))
	if v := value(t, s, "cupti_activity_records_total", "kernel"); v != 1000 {
		t.Errorf("newcomer's records %g, want 1000", v)
	}
	if v := value(t, s, "cupti_activity_dropped_connections_total", "limit"); v != 0 {
		t.Errorf("limit refusals %g, want 0", v)
	}
	if v := value(t, s, "cupti_activity_dropped_connections_total", "evicted_fair_share"); v != 1 {
		t.Errorf("evicted_fair_share %g, want 1", v)
	}
}

// moveTo rewrites this process's entry in the fake /proc at root with cgroup, and waits until
// the receiver reads it anew (its cache keeps an entry procCacheTTL).
func moveTo(t *testing.T, root, cgroup string) {
	t.Helper()
	writeFakeProc(t, root, 7, 1_795_000_000, 42, cgroup)
	time.Sleep(procCacheTTL + 50*time.Millisecond)
}

// valueOr0 is value, 0 for a series that does not exist.
func valueOr0(s *snapshot.Snapshot, name string, labels ...string) float64 {
	for _, f := range s.Families {
		for _, sm := range f.Samples {
			if f.Desc.Name == name && slices.Equal(sm.LabelValues, labels) {
				return sm.Value
			}
		}
	}
	return 0
}
