package activity

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// A verified process started 10 s ago (its start time is the kernel's) sends a kernel record
// lasting 584 years, as the issue did (it added 1.8e13 s to the node-wide kernel series), and
// one lasting a little less than its life. The first is refused and counted; the second counts.
func TestRecordLongerThanItsSenderRefused(t *testing.T) {
	clock := newFakeClock()
	now := uint64(clock.now().UnixNano())
	var l recordingListener
	a := NewAggregator(withClock(clock.now), WithListener(&l))
	p := &record.Process{PID: 7, StartTime: now - 10e9, Identity: record.IdentityVerified, Cgroup: "0::/a", DeviceUUIDs: []string{"GPU-a"}}
	a.Connect(p)
	a.Add(p, []record.Record{
		{Kind: record.KindKernel, Start: 1, End: math.MaxUint64, Name: "_Z4evilv"},
		{Kind: record.KindKernel, Start: now - 9e9, End: now - 1e9, Name: "_Z4realv"},
		{Kind: record.KindMemcpy, Start: 0, End: now, Bytes: 1},
	})
	s := a.Snapshot()
	gpuSeconds := mustSample(t, s, "cupti_kernel_gpu_seconds_total", "0", "GPU-a", "", "", "").Value
	t.Logf("kernel GPU seconds %g", gpuSeconds)
	if gpuSeconds != 8 {
		t.Errorf("kernel GPU seconds %g, want the plausible record's 8", gpuSeconds)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "implausible_duration").Value; v != 2 {
		t.Errorf("implausible_duration %g, want 2", v)
	}
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 1 {
		t.Errorf("kernel records %g, want 1", v)
	}
	// The listeners (the attribution join, the idle controller) get the plausible record only.
	if got := l.calls[len(l.calls)-1]; got != "records 7 1" {
		t.Errorf("listener got %q, want the one plausible record", got)
	}
}

// Without a start time the kernel vouches for (a claimed process that sent none), a record may
// not last longer than the process has been seen, nor any record longer than MaxRecordDuration.
func TestRecordDurationWithoutStartTime(t *testing.T) {
	clock := newFakeClock()
	a := NewAggregator(withClock(clock.now))
	p := &record.Process{PID: 7, Identity: record.IdentityClaimed, DeviceUUIDs: []string{"GPU-a"}}
	a.Connect(p)
	clock.advance(time.Minute)
	now := uint64(clock.now().UnixNano())
	old := &record.Process{PID: 8, StartTime: 1, DeviceUUIDs: []string{"GPU-a"}} // a recording's, 57 years ago
	a.Add(p, []record.Record{
		{Kind: record.KindKernel, Start: now - 30e9, End: now, Name: "_Z1kv"}, // within the minute seen
		{Kind: record.KindKernel, Start: now - 3600e9, End: now, Name: "_Z1kv"},
	})
	a.Add(old, []record.Record{
		{Kind: record.KindKernel, Start: now - 3600e9, End: now, Name: "_Z1kv"},
		{Kind: record.KindKernel, Start: now - uint64(MaxRecordDuration) - 1, End: now, Name: "_Z1kv"},
	})
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 2 {
		t.Errorf("kernel records %g, want 2", v)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "implausible_duration").Value; v != 2 {
		t.Errorf("implausible_duration %g, want 2", v)
	}
}

// Drop reports up to 2^40 each (the issue pushed node-wide counters to 2.6e11 with them) from a
// process that has lived 10 s: a counter cannot pass what the process could have produced in
// its life (MaxSenderRecordRate records a second), nor version_refused pass 1.
func TestDropReportsBoundedBySenderLife(t *testing.T) {
	clock := newFakeClock()
	now := uint64(clock.now().UnixNano())
	a := NewAggregator(withClock(clock.now))
	p := &record.Process{PID: 7, StartTime: now - 10e9, Identity: record.IdentityVerified, Cgroup: "0::/a", DeviceUUIDs: []string{"GPU-a"}}
	a.Connect(p)
	var refused int
	for i := range 10 {
		if err := a.SenderDrops(p, map[string]uint64{"queue_full": uint64(i+1) << 40}); err != nil {
			refused++
		}
	}
	if err := a.SenderDrops(p, map[string]uint64{"queue_full": 5000, "version_refused": 2}); err == nil || !strings.Contains(err.Error(), "version_refused") {
		t.Errorf("version_refused 2: err = %v, want a refusal", err)
	}
	if err := a.SenderDrops(p, map[string]uint64{"queue_full": 6000, "version_refused": 1}); err != nil {
		t.Errorf("a plausible report: %v", err)
	}
	s := a.Snapshot()
	q := mustSample(t, s, "cupti_activity_dropped_records_total", "queue_full").Value
	t.Logf("queue_full after 10 reports of +2^40 from a 10 s old process: %g (%d refused)", q, refused)
	if q != 6000 {
		t.Errorf("queue_full %g, want the plausible 6000", q)
	}
	// The first report passes the life bound; the next ones also jump by more than 2^40 from
	// the last taken value (0), and are counted as such.
	if v := mustSample(t, s, "cupti_activity_invalid_reports_total", "drops_implausible").Value; v != 2 {
		t.Errorf("drops_implausible %g, want 2 (the first 2^40, version_refused 2)", v)
	}
	if v := mustSample(t, s, "cupti_activity_invalid_reports_total", "drops_jump").Value; v != 9 {
		t.Errorf("drops_jump %g, want 9", v)
	}
	// As the process lives on, what it may have dropped grows with its life.
	clock.advance(time.Hour)
	if err := a.SenderDrops(p, map[string]uint64{"queue_full": 1 << 38}); err != nil {
		t.Errorf("2^38 drops after an hour (%g a second): %v", float64(1<<38)/3610, err)
	}
}
