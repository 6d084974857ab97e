package receiver

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

// One container (one cgroup, as the kernel names it) cannot hold every slot: past its share
// of connections that said hello (keep-alives, say), its next one is refused and counted,
// while its own silent connections make room for it first.
func TestIdentityConnectionLimit(t *testing.T) {
	const btime, ticks = 1_795_000_000, 42
	root := fakeProc(t, 7, btime, ticks, realCgroup)
	srv, agg := startServer(t, WithProcRoot(root), WithMaxConnectionsPerIdentity(4))
	hello := record.Process{PID: 7, StartTime: btime*1e9 + ticks*1e7, DeviceUUIDs: []string{"GPU-a"}}
	silent := dial(t, srv.Path())
	for range 3 {
		if err := wire.NewEncoder(dial(t, srv.Path())).Hello(hello); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, agg, "3 processes", func(s *snapshot.Snapshot) bool { return value(t, s, "cupti_activity_processes") == 3 })
	fourth := dial(t, srv.Path()) // the silent one makes room
	if err := wire.NewEncoder(fourth).Hello(hello); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "4 processes", func(s *snapshot.Snapshot) bool { return value(t, s, "cupti_activity_processes") == 4 })
	if !closedByServer(t, silent) {
		t.Error("the identity's silent connection was kept")
	}
	fifth := dial(t, srv.Path())
	if !closedByServer(t, fifth) {
		t.Error("a fifth connection of one identity was taken")
	}
	// the refusal is counted as the connection closes: wait for the snapshot that has it
	waitFor(t, agg, "one identity_limit and one evicted_no_hello", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_dropped_connections_total", "identity_limit") == 1 &&
			value(t, s, "cupti_activity_dropped_connections_total", "evicted_no_hello") == 1
	})
}

// Claimed connections (the kernel could not name them) that fill the server make room for a
// verified newcomer, the one holding the most memory first: a real workload is not locked
// out by clients that cannot say who they are.
func TestVerifiedNewcomerEvictsClaimed(t *testing.T) {
	const btime, ticks = 1_795_000_000, 42
	root := t.TempDir() // empty for now: the first connections are only claimed
	srv, agg := startServer(t, WithProcRoot(root), WithMaxConnections(4), WithBudget(activity.NewBudget(256<<20)))
	var claimed []net.Conn
	for i := range 4 {
		c := dial(t, srv.Path())
		if err := wire.NewEncoder(c).Hello(proc(uint32(100 + i))); err != nil {
			t.Fatal(err)
		}
		claimed = append(claimed, c)
	}
	heavy := claimed[2]
	for _, f := range nameTableFrames()[:2] { // 2 MiB of kernel names
		if _, err := heavy.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, agg, "4 claimed processes", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_identities_total", "claimed") == 4
	})
	time.Sleep(100 * time.Millisecond) // the name table charged
	writeFakeProc(t, root, 7, btime, ticks, realCgroup)
	enc := wire.NewEncoder(dial(t, srv.Path()))
	hello := proc(7)
	hello.StartTime = btime*1e9 + ticks*1e7 // the kernel's
	recs := make([]record.Record, 100)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Start: 1, End: 2, Name: "_Z4realv"}
	}
	if err := errors.Join(enc.Hello(hello), enc.Records(0, recs)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the verified sender's records", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_records_total", "kernel") == 100
	})
	if !closedByServer(t, heavy) {
		t.Error("the heaviest claimed connection was kept")
	}
	s := agg.Snapshot()
	if v := value(t, s, "cupti_activity_dropped_connections_total", "evicted_claimed"); v != 1 {
		t.Errorf("evicted_claimed %g, want 1", v)
	}
	if v := value(t, s, "cupti_activity_identities_total", "verified"); v != 1 {
		t.Errorf("verified %g, want 1", v)
	}
	if v := value(t, s, "cupti_activity_dropped_connections_total", "limit"); v != 0 {
		t.Errorf("limit %g, want 0", v)
	}
}
