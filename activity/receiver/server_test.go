package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

func value(t *testing.T, s *snapshot.Snapshot, name string, labels ...string) float64 {
	t.Helper()
	for _, f := range s.Families {
		if f.Desc.Name != name {
			continue
		}
		for _, sm := range f.Samples {
			if slices.Equal(sm.LabelValues, labels) {
				return sm.Value
			}
		}
	}
	t.Fatalf("no series %s%q", name, labels)
	return 0
}

// waitFor polls the aggregator's snapshot until cond holds.
func waitFor(t *testing.T, a *activity.Aggregator, what string, cond func(*snapshot.Snapshot) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(a.Snapshot()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startServer runs a server on a socket in a fresh directory and stops it at cleanup.
func startServer(t *testing.T, opts ...Option) (*Server, *activity.Aggregator) {
	t.Helper()
	return startServerAgg(t, activity.NewAggregator(), opts...)
}

// startServerAgg is startServer feeding agg.
func startServerAgg(t *testing.T, agg *activity.Aggregator, opts ...Option) (*Server, *activity.Aggregator) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "activity.sock")
	// An empty /proc: peers are only claimed unless a test gives a tree of its own.
	opts = append([]Option{WithProcRoot(t.TempDir())}, opts...)
	srv, err := NewServer(path, agg, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	testutil.RunUntilCleanup(t, srv.Serve)
	return srv, agg
}

func dial(t *testing.T, path string) net.Conn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// selfProc is the honest hello of this test process, with its start time as the injection
// library computes it, which the kernel verifies against the real /proc.
func selfProc() record.Process {
	p := proc(uint32(os.Getpid()))
	self, err := readProc("/proc", int32(os.Getpid()), new(bootTime))
	if err != nil {
		panic(err)
	}
	p.StartTime = self.startTime
	return p
}

func proc(pid uint32) record.Process {
	return record.Process{PID: pid, StartTime: 1, Executable: "/usr/bin/python3", DeviceUUIDs: []string{"GPU-aaaa"},
		Pod: fmt.Sprintf("pod-%d", pid), Namespace: "ns", Container: "c"}
}

// send plays one well-behaved process: hello, batches of kernels, drops, goodbye.
func send(c net.Conn, pid uint32, batches, perBatch int) error {
	enc := wire.NewEncoder(c)
	if err := enc.Hello(proc(pid)); err != nil {
		return err
	}
	recs := make([]record.Record, perBatch)
	for b := range batches {
		for i := range recs {
			recs[i] = record.Record{Kind: record.KindKernel, Start: 10, End: 10 + uint64(1000*(i+1)), Name: "_Z4busyPfii"}
		}
		if err := enc.Records(0, recs); err != nil {
			return err
		}
		var d wire.Drops
		d[wire.DropQueueFull] = uint64(b + 1)
		if err := enc.Drops(d); err != nil {
			return err
		}
	}
	var d wire.Drops
	d[wire.DropQueueFull] = uint64(batches)
	return enc.Goodbye(uint64(batches*perBatch), d)
}

func TestServerEndToEnd(t *testing.T) {
	// The senders are this test, whose hellos claim other processes: they are only claimed,
	// and their pods label their series on trust.
	srv, agg := startServerAgg(t, activity.NewAggregator(activity.WithTrustHelloPods(true)))
	const senders, batches, perBatch = 4, 5, 100
	var wg sync.WaitGroup
	errs := make(chan error, senders+1)
	for i := range senders {
		c := dial(t, srv.Path())
		wg.Go(func() { errs <- send(c, uint32(100+i), batches, perBatch) })
	}
	// A sender whose second frame is garbage: only its connection is dropped.
	bad := dial(t, srv.Path())
	wg.Go(func() {
		enc := wire.NewEncoder(bad)
		if err := enc.Hello(proc(666)); err != nil {
			errs <- err
			return
		}
		_, err := bad.Write(wire.AppendFrame([]byte("garbage!"), wire.FrameRecords, nil))
		errs <- err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, agg, "all records and disconnects", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_records_total", "kernel") == senders*batches*perBatch &&
			value(t, s, "cupti_activity_processes") == 0 &&
			value(t, s, "cupti_activity_dropped_connections_total", "malformed") == 1
	})
	s := agg.Snapshot()
	if v := value(t, s, "cupti_activity_connections_total"); v != senders+1 {
		t.Errorf("connections %g, want %d", v, senders+1)
	}
	if v := value(t, s, "cupti_activity_dropped_records_total", "queue_full"); v != senders*batches {
		t.Errorf("queue_full drops %g, want %d", v, senders*batches)
	}
	if v := value(t, s, "cupti_activity_dropped_connections_total", "read_error"); v != 0 {
		t.Errorf("read errors %g, want 0", v)
	}
	// Each pod got perBatch kernels of 1..perBatch us, batches times.
	want := float64(batches) * float64(perBatch*(perBatch+1)/2) * 1e-6
	for i := range senders {
		if v := value(t, s, "cupti_kernel_gpu_seconds_total", "0", "GPU-aaaa", "ns", fmt.Sprintf("pod-%d", 100+i), "c"); v < want*0.999999 || v > want*1.000001 {
			t.Errorf("pod-%d GPU seconds %g, want %g", 100+i, v, want)
		}
	}
}

func TestServerPermissions(t *testing.T) {
	srv, _ := startServer(t, WithSocketMode(0o600))
	fi, err := os.Lstat(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
	di, err := os.Stat(filepath.Dir(srv.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if di.Mode().Perm() != 0o750 {
		t.Errorf("directory mode %v, want 0750", di.Mode().Perm())
	}
}

func TestServerDefaultSocketMode(t *testing.T) {
	srv, _ := startServer(t)
	fi, err := os.Lstat(srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v, want 0660", fi.Mode().Perm())
	}
}

func TestNewServerStaleAndBusySockets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.sock")
	// A socket left behind by a dead process: removed and replaced.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	srv, err := NewServer(path, activity.NewAggregator(), nil)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	// A live server on the path: refused.
	if _, err := NewServer(path, activity.NewAggregator(), nil); err == nil {
		t.Error("NewServer took over a socket another server listens on")
	}
	srv.Close()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file left after Close: %v", err)
	}
	// A regular file on the path: refused and kept.
	regular := filepath.Join(dir, "file")
	if err := os.WriteFile(regular, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewServer(regular, activity.NewAggregator(), nil); err == nil {
		t.Error("NewServer accepted a regular file as socket path")
	}
	if _, err := os.Stat(regular); err != nil {
		t.Errorf("regular file removed: %v", err)
	}
}

func TestServerConnectionLimit(t *testing.T) {
	srv, agg := startServer(t, WithMaxConnections(1))
	first := dial(t, srv.Path())
	if err := wire.NewEncoder(first).Hello(proc(1)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "first process", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_processes") == 1
	})
	second := dial(t, srv.Path())
	second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := second.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("second connection read: %v, want EOF (refused)", err)
	}
	waitFor(t, agg, "refusal counted", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_dropped_connections_total", "limit") == 1
	})
	// The first connection ends without goodbye: the process is gone all the same.
	first.Close()
	waitFor(t, agg, "disconnect at EOF", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_processes") == 0
	})
}

func TestServerCloseUnblocksConnections(t *testing.T) {
	agg := activity.NewAggregator()
	srv, err := NewServer(filepath.Join(t.TempDir(), "a.sock"), agg, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background()) }()
	c := dial(t, srv.Path())
	if err := wire.NewEncoder(c).Hello(selfProc()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "process", func(s *snapshot.Snapshot) bool { return value(t, s, "cupti_activity_processes") == 1 })
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve blocked after Close with a connection open")
	}
	if v := value(t, agg.Snapshot(), "cupti_activity_processes"); v != 0 {
		t.Errorf("processes %g after Close, want 0", v)
	}
	if v := value(t, agg.Snapshot(), "cupti_activity_dropped_connections_total", "read_error"); v != 0 {
		t.Errorf("Close counted as read error (%g)", v)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestSenderDropReasonsMatchWire keeps the reasons the aggregator pre-creates in step with
// the wire format's.
func TestSenderDropReasonsMatchWire(t *testing.T) {
	var names []string
	for r := range wire.NumDropReasons {
		names = append(names, r.String())
	}
	if !slices.Equal(names, activity.SenderDropReasons) {
		t.Errorf("activity.SenderDropReasons = %v, wire reasons %v", activity.SenderDropReasons, names)
	}
}
