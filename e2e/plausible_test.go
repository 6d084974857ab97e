package e2e

import (
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// A verified process sends what it could not have produced, against the binary: a kernel
// record lasting 584 years (before: 1.8e13 s added to the node's kernel series), one lasting
// ten years (it has lived minutes), one ending an hour from now, and ten drop reports of
// +2^40 (before: node-wide queue_full at 1.1e13). Only its plausible record counts; the rest
// is refused and counted.
func TestActivityImplausibleValues(t *testing.T) {
	p, sock := startFake(t)
	now := uint64(time.Now().UnixNano())
	recs := []record.Record{
		{Kind: record.KindKernel, Start: 0, End: math.MaxUint64, Name: "_Z4evilv"},
		{Kind: record.KindKernel, Start: now - 10*365*24*3600e9, End: now - 1e9, Name: "_Z4evilv"},
		{Kind: record.KindKernel, Start: now + 3600e9, End: now + 3600e9 + 1000, Name: "_Z4evilv"},
		{Kind: record.KindKernel, Start: now - 2e9, End: now - 1e9, Name: "_Z4realv"},
	}
	c, enc := dialActivity(t, sock)
	defer c.Close()
	if err := enc.Hello(honest()); err != nil {
		t.Fatal(err)
	}
	if err := enc.Records(0, recs); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		enc.Drops(wire.Drops{wire.DropQueueFull: uint64(i+1) << 40})
	}
	enc.Goodbye(4, wire.Drops{wire.DropQueueFull: 10 << 40})
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the records and reports judged", func() bool {
		_, fams = p.scrape(t)
		return metric(fams, "cupti_activity_processes", nil) == 0 &&
			metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})+
				metric(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": "ends_ahead"}) > 0
	})
	gpuSeconds := metric(fams, "cupti_kernel_gpu_seconds_total", map[string]string{"gpu": "0"})
	queueFull := metric(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": "queue_full"})
	t.Logf("kernel GPU seconds %g, kernel records %g, queue_full %g", gpuSeconds,
		metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"}), queueFull)
	if gpuSeconds != 1 {
		t.Errorf("kernel GPU seconds %g, want the plausible record's 1", gpuSeconds)
	}
	if queueFull != 0 {
		t.Errorf("queue_full %g, want 0", queueFull)
	}
	for reason, want := range map[string]float64{"implausible_duration": 1, "ends_ahead": 2} {
		if v := metric(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": reason}); v != want {
			t.Errorf("dropped records %s %g, want %g", reason, v, want)
		}
	}
	if v := metric(fams, "cupti_activity_invalid_reports_total", map[string]string{"reason": "drops_implausible"}) +
		metric(fams, "cupti_activity_invalid_reports_total", map[string]string{"reason": "drops_jump"}); v != 11 {
		t.Errorf("refused drop reports %g, want 11", v)
	}
}
