package receiver

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// sendOne connects to path and sends a hello and one kernel record.
func sendOne(t *testing.T, path string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("connecting after the socket was re-created: %v", err)
	}
	defer c.Close()
	enc := wire.NewEncoder(c)
	if err := enc.Hello(proc(uint32(os.Getpid()))); err != nil {
		t.Fatal(err)
	}
	if err := enc.Records(0, []record.Record{{Kind: record.KindKernel, Start: 1, End: 2, Name: "k"}}); err != nil {
		t.Fatal(err)
	}
}

// A socket file removed (a cleanup of its directory) or replaced by another process's
// socket is re-created within a check: before, new workloads could not connect (739,000
// records lost), with /readyz 200 and no log. Each is counted once; a path replaced by a
// file that is not a socket is left alone and reported until it is fixed.
func TestSocketRecreated(t *testing.T) {
	srv, agg := startServer(t, WithSocketCheck(20*time.Millisecond))
	path := srv.Path()
	kernels := func(s *snapshot.Snapshot) float64 { return value(t, s, "cupti_activity_records_total", "kernel") }

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the removal counted", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_socket_recreations_total", "removed") == 1
	})
	// Back: the file at the path is the one the server listens on (it exists from the bind,
	// a moment before the listen: a connect in between is refused).
	back := func(*snapshot.Snapshot) bool {
		fi, err := os.Stat(path)
		return err == nil && os.SameFile(fi, srv.file.Load().info) && srv.SocketProblem() == ""
	}
	waitFor(t, agg, "the socket back", back)
	sendOne(t, path)
	waitFor(t, agg, "the record", func(s *snapshot.Snapshot) bool { return kernels(s) == 1 })

	// Another process binds the path: the exporter takes it back.
	os.Remove(path)
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	waitFor(t, agg, "the replacement counted", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_socket_recreations_total", "replaced") == 1
	})
	waitFor(t, agg, "the socket back", back)
	sendOne(t, path)
	waitFor(t, agg, "the record", func(s *snapshot.Snapshot) bool { return kernels(s) == 2 })

	// A regular file in its place: reported, not removed.
	os.Remove(path)
	if err := os.WriteFile(path, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the problem reported", func(*snapshot.Snapshot) bool { return srv.SocketProblem() != "" })
	if b, err := os.ReadFile(path); err != nil || string(b) != "mine" {
		t.Errorf("the file in the socket's place was touched: %q %v", b, err)
	}
	if v := value(t, agg.Snapshot(), "cupti_activity_socket_recreations_total", "replaced"); v != 2 {
		t.Errorf("replaced %g, want 2 (counted once while it lasts)", v)
	}
	time.Sleep(100 * time.Millisecond)
	if v := value(t, agg.Snapshot(), "cupti_activity_socket_recreations_total", "replaced"); v != 2 {
		t.Errorf("replaced %g after more checks, want still 2", v)
	}
	os.Remove(path)
	waitFor(t, agg, "the socket back", back)
	sendOne(t, path)
	waitFor(t, agg, "the record", func(s *snapshot.Snapshot) bool { return kernels(s) == 3 })
	// Closing removes the file it listens on, not left behind after a re-creation.
	srv.Close()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket file left after Close: %v", err)
	}
}

// A refused connection's records already in the socket are counted, not lost without a
// trace (the sender counts only what it fails to write).
func TestRefusedConnectionRecordsCounted(t *testing.T) {
	srv, agg := startServer(t)
	path := filepath.Join(t.TempDir(), "side.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	enc := wire.NewEncoder(c)
	recs := make([]record.Record, 250)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Start: 1, End: 2, Name: "k"}
	}
	if err := errors.Join(enc.Hello(proc(9)), enc.Records(0, recs), enc.Records(0, recs)); err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	srv.refuse(sc, "limit")
	s := agg.Snapshot()
	if v := value(t, s, "cupti_activity_dropped_records_total", "refused_connection"); v != 500 {
		t.Errorf("refused_connection drops %g, want 500", v)
	}
	if v := value(t, s, "cupti_activity_dropped_connections_total", "limit"); v != 1 {
		t.Errorf("limit refusals %g, want 1", v)
	}
}
