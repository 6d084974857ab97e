package wire

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
)

// fakeRecord mirrors the synthetic record g of activity/inject/test/fake_cupti.h.
func fakeRecord(g uint64) record.Record {
	r := record.Record{
		Device: uint32(g % 2), Stream: uint32(7 + g/1000000),
		Start: 1000*g + 1, End: 1000*g + 1 + 100 + g%7,
	}
	switch g % 3 {
	case 0:
		r.Kind, r.Name = record.KindKernel, fmt.Sprintf("kernel_%d", g%5)
	case 1:
		r.Kind, r.Bytes, r.CopyKind, r.SrcKind, r.DstKind = record.KindMemcpy, 4096+g, record.CopyKind(1+g%2), 1, 3
		if g%5 == 0 { // peer-to-peer copy from the other device to Device
			r.CopyKind, r.SrcKind, r.SrcDevice = 10, 3, uint32(1-g%2)
		}
	case 2:
		r.Kind, r.Bytes, r.MemoryKind = record.KindMemset, 512+g, 3
	}
	return r
}

// TestInjectionLibrary builds the C injection library and the fake libcupti
// with make, runs the harness's "drive" mode (4 threads x 5 buffers x 30
// records) against a socket of ours, and decodes what the library sends.
// startHarness builds the C library, the fake libcupti and the harness, listens on a
// socket and starts the harness in mode with extra environment.
func startHarness(t *testing.T, mode string, env ...string) (ln net.Listener, cmd *exec.Cmd, stderr *testutil.SyncBuffer, done chan error) {
	t.Helper()
	for _, tool := range []string{"gcc", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping: %s not found (install gcc and make to test activity/inject)", tool)
		}
	}
	build := t.TempDir()
	mk := exec.Command("make", "-C", filepath.Join("..", "inject"), "BUILD="+build, "test-bins")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("building activity/inject: %v\n%s", err, out)
	}
	sock := filepath.Join(t.TempDir(), "a.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	fake := filepath.Join(build, "libfake_cupti.so")
	cmd = exec.Command(filepath.Join(build, "harness"), mode)
	cmd.Env = append(append(os.Environ(),
		"INJECT_LIB="+filepath.Join(build, "libcupti_exporter_inject.so"),
		"CUPTI_EXPORTER_CUPTI_LIBRARY="+fake, "CUPTI_EXPORTER_CUDA_LIBRARY="+fake,
		"CUPTI_EXPORTER_SOCKET="+sock, "CUPTI_EXPORTER_FLUSH_INTERVAL_MS=20"), env...)
	stderr = new(testutil.SyncBuffer) // the harness writes it while the test reads
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return ln, cmd, stderr, done
}

func TestInjectionLibrary(t *testing.T) {
	ln, cmd, stderr, done := startHarness(t, "drive", "POD_NAME=trainer-0", "POD_NAMESPACE=ml", "CONTAINER_NAME=main")

	ln.(*net.UnixListener).SetDeadline(time.Now().Add(10 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("accepting the library's connection: %v\n%s", err, stderr)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))

	d := NewDecoder(conn)
	var hello *record.Process
	var got []record.Record
	var spans []record.Interval
	var recordsBeforeLastSpan int
	var goodbye *Message
	for {
		m, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decoding: %v\n%s", err, stderr)
		}
		switch m.Type {
		case FrameHello:
			hello = &m.Process
		case FrameRecords:
			got = append(got, m.Records...)
		case FrameCoverage:
			spans = append(spans, m.Coverage...)
			recordsBeforeLastSpan = len(got)
		case FrameGoodbye:
			goodbye = m
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("harness: %v\n%s", err, stderr)
	}

	if hello == nil || hello.PID != uint32(cmd.Process.Pid) || hello.CUPTIVersion != 130001 || hello.CUDAVersion != 13000 ||
		hello.Pod != "trainer-0" || hello.Namespace != "ml" || hello.Container != "main" || hello.StartTime == 0 {
		t.Errorf("hello = %+v", hello)
	}
	wantUUIDs := []string{"GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"}
	if hello != nil && !reflect.DeepEqual(hello.DeviceUUIDs, wantUUIDs) {
		t.Errorf("device UUIDs = %q, want %q", hello.DeviceUUIDs, wantUUIDs)
	}
	var want []record.Record
	for th := range uint64(4) {
		for r := range uint64(5) {
			for i := range uint64(30) {
				want = append(want, fakeRecord(th*1000000+r*1000+i))
			}
		}
	}
	byStart := func(a, b record.Record) int { return int(int64(a.Start - b.Start)) }
	slices.SortFunc(got, byStart)
	slices.SortFunc(want, byStart)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %d records, want %d; first difference: %s", len(got), len(want), firstDiff(got, want))
	}
	if goodbye == nil || goodbye.SentRecords != uint64(len(want)) || goodbye.DropTotal != 0 {
		t.Errorf("goodbye = %+v, want %d records sent and no drops", goodbye, len(want))
	}
	// Coverage (wire version 2, the library speaks 3): the traced time from init to exit,
	// cut at each flush, without gaps or losses, and the last span after every record.
	if d.Version() != Version {
		t.Errorf("library speaks wire version %d, want %d", d.Version(), Version)
	}
	if len(spans) == 0 {
		t.Fatal("no coverage spans")
	}
	for i, s := range spans {
		if s.Lossy || (i > 0 && s.Start != spans[i-1].End) {
			t.Errorf("span %d %+v after %+v: want contiguous and complete", i, s, spans[max(i-1, 0)])
		}
	}
	if recordsBeforeLastSpan != len(want) {
		t.Errorf("last span after %d records, want after all %d", recordsBeforeLastSpan, len(want))
	}
	if now := uint64(time.Now().UnixNano()); spans[0].Start > now || now-spans[0].Start > uint64(time.Minute) {
		t.Errorf("first span starts at %d, not within the last minute of %d (CUPTI's clock is the Unix epoch)", spans[0].Start, now)
	}
}

func firstDiff(got, want []record.Record) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	return "length"
}

// TestInjectionLibraryHungExporter: the exporter reads nothing while the workload floods
// and exits (issue 11: the workload's stderr counted 72 M dropped records, the exporter
// 2.3 M). The library gives up on the stuck connection at exit and sends its final
// counters on a new one; read by the Aggregator in the worst order (the new connection
// first, then the stale frames of the old one), records plus drops add up to what the
// workload produced, and nothing is refused as invalid.
func TestInjectionLibraryHungExporter(t *testing.T) {
	ln, _, stderr, done := startHarness(t, "flood", "CUPTI_EXPORTER_QUEUE_RECORDS=1024", "CUPTI_EXPORTER_EXIT_TIMEOUT_MS=400")
	if err := <-done; err != nil { // the exporter is "hung": nothing accepted until the workload is gone
		t.Fatalf("harness: %v\n%s", err, stderr)
	}
	ln.(*net.UnixListener).SetDeadline(time.Now().Add(5 * time.Second))
	var conns []net.Conn
	for i := range 2 {
		c, err := ln.Accept()
		if err != nil && i == 1 { // a machine too loaded for the sender to ever fill the socket buffer
			t.Logf("one connection only: the sender never got stuck, the fallback was not exercised")
			break
		}
		if err != nil {
			t.Fatalf("accepting: %v\n%s", err, stderr)
		}
		defer c.Close()
		conns = append(conns, c)
		ln.(*net.UnixListener).SetDeadline(time.Now().Add(time.Second))
	}
	slices.Reverse(conns) // the final connection first: the stale frames of the stuck one come last
	agg := activity.NewAggregator()
	for _, c := range conns {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		d := NewDecoder(c)
		var p *record.Process
		var m Message
		for {
			err := d.ReadInto(&m)
			if err != nil {
				break // the old connection ends inside the frame that was stuck
			}
			switch m.Type {
			case FrameHello:
				proc := m.Process
				p = &proc
				agg.Connect(p)
			case FrameRecords:
				agg.Add(p, m.Records)
			case FrameCoverage:
				agg.Coverage(p, m.Coverage)
			case FrameDrops, FrameGoodbye:
				drops := map[string]uint64{}
				for i, v := range m.Drops {
					drops[DropReason(i).String()] = v
				}
				if err := agg.SenderDrops(p, drops); err != nil {
					t.Errorf("drop report refused: %v", err)
				}
			}
		}
	}
	var records, queueFull, lossy float64
	for _, f := range agg.Snapshot().Families {
		for _, s := range f.Samples {
			switch {
			case f.Desc.Name == "cupti_activity_records_total":
				records += s.Value
			case f.Desc.Name == "cupti_activity_dropped_records_total" && s.LabelValues[0] == "queue_full":
				queueFull = s.Value
			case f.Desc.Name == "cupti_activity_traced_seconds_total" && s.LabelValues[0] == "lossy":
				lossy = s.Value
			}
		}
	}
	if queueFull == 0 || records+queueFull != 20000 {
		t.Errorf("records %g + queue_full %g = %g, want 20000 (what the workload produced)\n%s", records, queueFull, records+queueFull, stderr)
	}
	if lossy == 0 {
		t.Errorf("no lossy traced time, though records were lost")
	}
}
