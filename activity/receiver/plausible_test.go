package receiver

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// recTap keeps what the listeners get: records and launch hints.
type recTap struct {
	mu       sync.Mutex
	records  int
	launches []uint64
}

func (*recTap) ProcessConnected(*record.Process, activity.ProcessInfo) {}
func (r *recTap) Records(_ *record.Process, recs []record.Record) {
	r.mu.Lock()
	r.records += len(recs)
	r.mu.Unlock()
}
func (*recTap) Coverage(*record.Process, []record.Interval) {}
func (*recTap) ProcessDisconnected(*record.Process)         {}
func (r *recTap) Launched(_ *record.Process, at uint64) {
	r.mu.Lock()
	r.launches = append(r.launches, at)
	r.mu.Unlock()
}

// A record that ends in the future (CUPTI reports a kernel after it ends) is refused and
// counted; before, it was counted and reached the idle controller, which held the GPU busy
// until then. Spans of coverage in the future or longer than the sender's life, and launch
// hints in the future, are refused and counted too (a 500-year span added 1.6e10 traced
// seconds).
func TestTimesInTheFutureRefused(t *testing.T) {
	var tap recTap
	srv, agg := startServerAgg(t, activity.NewAggregator(activity.WithListener(&tap)))
	c := dial(t, srv.Path())
	enc := wire.NewEncoder(c)
	now := uint64(time.Now().UnixNano())
	const hour = 3600e9
	recs := []record.Record{
		{Kind: record.KindKernel, Start: now + hour, End: now + hour + 1000, Name: "_Z4evilv"},
		{Kind: record.KindKernel, Start: now - 2000, End: now - 1000, Name: "_Z4realv"},
	}
	spans := []record.Interval{
		{Start: now - 2e9, End: now - 1e9},             // one second: counted
		{Start: now - 1e9, End: now + 500*365*24*hour}, // 500 years, all but a second ahead
	}
	if err := errors.Join(enc.Hello(proc(7)), enc.Records(0, recs), enc.Coverage(spans),
		enc.Launch(wire.Launch{Time: now + hour, API: 5, CBID: 211}), enc.Launch(wire.Launch{Time: now - 1000, API: 5, CBID: 211}),
		enc.Goodbye(2, wire.Drops{})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the goodbye", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_processes") == 0 && value(t, s, "cupti_activity_records_total", "kernel") > 0
	})
	s := agg.Snapshot()
	t.Logf("kernel records %g (ends_ahead %g), traced seconds %g, launches forwarded %d",
		value(t, s, "cupti_activity_records_total", "kernel"), valueOr0(s, "cupti_activity_dropped_records_total", "ends_ahead"),
		value(t, s, "cupti_activity_traced_seconds_total", "complete"), len(tap.launches))
	if v := value(t, s, "cupti_activity_records_total", "kernel"); v != 1 {
		t.Errorf("kernel records %g, want 1", v)
	}
	if v := valueOr0(s, "cupti_activity_dropped_records_total", "ends_ahead"); v != 1 {
		t.Errorf("ends_ahead %g, want 1", v)
	}
	if v := value(t, s, "cupti_activity_traced_seconds_total", "complete"); v != 1 {
		t.Errorf("traced seconds %g, want the plausible span's 1", v)
	}
	if v := valueOr0(s, "cupti_activity_invalid_reports_total", "coverage_implausible"); v != 1 {
		t.Errorf("coverage_implausible %g, want 1", v)
	}
	if v := valueOr0(s, "cupti_activity_invalid_reports_total", "launch_ahead"); v != 1 {
		t.Errorf("launch_ahead %g, want 1", v)
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if tap.records != 1 || len(tap.launches) != 1 {
		t.Errorf("listeners got %d records and %d launches, want 1 and 1", tap.records, len(tap.launches))
	}
}

// A claimed process (the kernel cannot name it) claims to have started before the node booted:
// its start time is refused, and its drop counters are bounded by the time since the exporter
// first heard of it. Before, its report of 2^39 drops, the moment it connected, was taken.
func TestClaimedStartTimeBeforeBootRefused(t *testing.T) {
	root := t.TempDir() // a /proc with the boot time only: the peer itself cannot be read
	writeFakeProc(t, root, 7, 1_795_000_000, 42, realCgroup)
	if err := os.RemoveAll(filepath.Join(root, strconv.Itoa(os.Getpid()))); err != nil {
		t.Fatal(err)
	}
	var tap connTap
	srv, agg := startServerAgg(t, activity.NewAggregator(activity.WithListener(&tap)), WithProcRoot(root))
	c := dial(t, srv.Path())
	enc := wire.NewEncoder(c)
	hello := proc(7)
	hello.StartTime = 1 // 1970
	if err := errors.Join(enc.Hello(hello), enc.Drops(wire.Drops{wire.DropQueueFull: 1 << 39})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the drop report judged", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_dropped_records_total", "queue_full") > 0 ||
			valueOr0(s, "cupti_activity_invalid_reports_total", "drops_implausible") > 0
	})
	s := agg.Snapshot()
	p, _ := tap.last(t)
	t.Logf("claimed start time taken as %d; queue_full %g", p.StartTime, value(t, s, "cupti_activity_dropped_records_total", "queue_full"))
	if p.Identity != record.IdentityClaimed || p.StartTime != 0 {
		t.Errorf("connected as %v with start time %d, want claimed without one", p.Identity, p.StartTime)
	}
	if v := valueOr0(s, "cupti_activity_refused_claims_total", "start_time", "invalid"); v != 1 {
		t.Errorf("invalid start_time claims %g, want 1", v)
	}
	if v := value(t, s, "cupti_activity_dropped_records_total", "queue_full"); v != 0 {
		t.Errorf("queue_full %g, want 0 (2^39 records in no time)", v)
	}
}

// Control characters (ESC, CR, NUL...) in the text of a hello reach no label value and no
// process text the exporter passes on (logs, recordings, listeners): the text claims that
// carry them are counted as invalid. Kernel names are shortened apart (activity/names.go).
func TestControlCharactersRefused(t *testing.T) {
	var tap connTap
	srv, agg := startServerAgg(t, activity.NewAggregator(activity.WithListener(&tap), activity.WithTrustHelloPods(true)))
	hello := record.Process{PID: 7, StartTime: 1, Executable: "/bin/py\x1b[31mthon\r\x00", Cgroup: "0::/x\x1b]0;owned\x07",
		Pod: "pod\x1b", Namespace: "ns\r", Container: "c\x00", DeviceUUIDs: []string{"GPU-\x1bz", "GPU-ok"}}
	c := dial(t, srv.Path())
	enc := wire.NewEncoder(c)
	if err := errors.Join(enc.Hello(hello), enc.Records(0, []record.Record{{Kind: record.KindKernel, Device: 1, Start: 1, End: 2, Name: "_Z1kv"}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the record", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_records_total", "kernel") == 1
	})
	p, info := tap.last(t)
	for _, v := range append([]string{p.Executable, p.Cgroup, p.Pod, p.Namespace, p.Container, info.Pod, info.Namespace, info.Container},
		append(p.DeviceUUIDs, info.UUIDs...)...) {
		if strings.ContainsFunc(v, unicode.IsControl) {
			t.Errorf("process text %q carries control characters", v)
		}
	}
	s := agg.Snapshot()
	for _, f := range s.Families {
		for _, sm := range f.Samples {
			for _, l := range sm.LabelValues {
				if strings.ContainsFunc(l, unicode.IsControl) {
					t.Errorf("%s%q carries control characters", f.Desc.Name, sm.LabelValues)
				}
			}
		}
	}
	for _, claim := range []string{"executable", "cgroup", "pod", "namespace", "container", "device_uuid"} {
		if v := valueOr0(s, "cupti_activity_refused_claims_total", claim, "invalid"); v != 1 {
			t.Errorf("invalid %s claims %g, want 1", claim, v)
		}
	}
}
