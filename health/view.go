package health

import (
	"slices"
	"strings"
	"sync"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// View serves the snapshots of a health source (live, or a recording's) without the series an
// idle GPU does without by default (docs/sizing.md "An idle GPU"): the detail no dashboard or
// alert reads (detailSeries), and the series of reasons that never held (fromFirstEvent),
// which appear at their first non-zero value and stay. The source keeps everything, so a
// recording holds every series whatever the view serves.
type View struct {
	src    interface{ Snapshot() *snapshot.Snapshot }
	detail bool // serve detailSeries
	zeros  bool // serve fromFirstEvent from the start

	mu   sync.Mutex
	in   *snapshot.Snapshot // the source snapshot out was made from
	out  *snapshot.Snapshot
	seen map[string]bool // fromFirstEvent series that were non-zero once
}

// ViewOption configures a View.
type ViewOption func(*View)

// WithDetail also serves detailSeries.
func WithDetail(on bool) ViewOption { return func(v *View) { v.detail = on } }

// WithZeroReasons serves the fromFirstEvent series from the start, at 0.
func WithZeroReasons(on bool) ViewOption { return func(v *View) { v.zeros = on } }

// NewView serves src's snapshots through the view; src is a *Source or a recording's health.
func NewView(src interface{ Snapshot() *snapshot.Snapshot }, opts ...ViewOption) *View {
	v := &View{src: src, seen: map[string]bool{}}
	for _, o := range opts {
		o(v)
	}
	return v
}

// selector picks series of a family: all of them (label ""), or those whose label has one of
// values (not: one of the others).
type selector struct {
	family string
	label  string
	values []string
	not    bool
}

// detailSeries are served only WithDetail: no dashboard or alert reads them, and the defaults
// serve what they would say another way (memory used and total; clocks sm and memory, and the
// SM's maximum; the volatile ECC counters; PM sampling's DRAM activity for the copy engine).
var detailSeries = []selector{
	{family: "cupti_gpu_bar1_memory_used_bytes"},
	{family: "cupti_gpu_bar1_memory_total_bytes"},
	{family: "cupti_gpu_memory_free_bytes"},
	{family: "cupti_gpu_memory_reserved_bytes"},
	{family: "cupti_nvml_memory_copy_utilization_ratio"},
	{family: "cupti_nvml_encoder_utilization_ratio"},
	{family: "cupti_nvml_decoder_utilization_ratio"},
	{family: "cupti_gpu_mig_enabled"},
	{family: "cupti_gpu_ecc_errors_total", label: "counter", values: []string{"aggregate"}},
	{family: "cupti_gpu_clock_hertz", label: "clock", values: []string{"graphics"}}, // the SM clock on compute GPUs
	{family: "cupti_gpu_max_clock_hertz", label: "clock", values: []string{"graphics", "memory"}},
}

// fromFirstEvent are served from their first non-zero value on (WithZeroReasons: always):
// zeros that say nothing happened. The series alerts take rates or increases of are not
// among them (thermal, power and the hardware slowdowns' clock-event time, uncorrected ECC
// errors), so an alert sees their first increase.
var fromFirstEvent = []selector{
	{family: "cupti_gpu_clock_event_reasons"},
	{family: "cupti_gpu_clock_event_seconds_total", label: "reason", not: true,
		values: []string{"power", "thermal", "hw_thermal_slowdown", "hw_power_brake_slowdown"}},
	{family: "cupti_gpu_ecc_errors_total", label: "type", values: []string{"corrected"}},
}

// match reports whether s selects sample x of family d.
func (s selector) match(d *snapshot.Desc, x snapshot.Sample) bool {
	if d.Name != s.family {
		return false
	}
	if s.label == "" {
		return true
	}
	i := slices.Index(d.LabelNames, s.label)
	if i < 0 || i >= len(x.LabelValues) {
		return false
	}
	return slices.Contains(s.values, x.LabelValues[i]) != s.not
}

func anyMatch(sel []selector, d *snapshot.Desc, x snapshot.Sample) bool {
	for _, s := range sel {
		if s.match(d, x) {
			return true
		}
	}
	return false
}

// Snapshot implements the exporter's Producer: the source's newest snapshot through the view
// (nil before the source's first).
func (v *View) Snapshot() *snapshot.Snapshot {
	in := v.src.Snapshot()
	v.mu.Lock()
	defer v.mu.Unlock()
	if in == nil || in == v.in {
		if in == nil {
			return nil
		}
		return v.out
	}
	v.markLocked(in)
	out := &snapshot.Snapshot{Time: in.Time}
	for _, f := range in.Families {
		var keep []snapshot.Sample
		for _, x := range f.Samples {
			if !v.detail && anyMatch(detailSeries, f.Desc, x) {
				continue
			}
			if !v.zeros && anyMatch(fromFirstEvent, f.Desc, x) && !v.seen[seriesKey(f.Desc, x)] {
				continue
			}
			keep = append(keep, x)
		}
		if len(keep) > 0 {
			out.Families = append(out.Families, snapshot.Family{Desc: f.Desc, Samples: keep})
		}
	}
	v.in, v.out = in, out
	return out
}

// Observe marks the series of fromFirstEvent that are non-zero in s as seen. The source calls
// it with every snapshot it makes: the view itself sees only the snapshots scrapes find, so a
// reason that held between two scrapes (or a replay's frames, many a scrape) would otherwise
// never appear, and which did would depend on when the scrapes came.
func (v *View) Observe(s *snapshot.Snapshot) {
	if s == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.markLocked(s)
}

// markLocked marks the series of fromFirstEvent that are non-zero in s as seen (bounded: GPUs x
// the fixed reasons); v.mu is held.
func (v *View) markLocked(s *snapshot.Snapshot) {
	if v.zeros {
		return
	}
	for _, f := range s.Families {
		for _, x := range f.Samples {
			if x.Value != 0 && anyMatch(fromFirstEvent, f.Desc, x) {
				v.seen[seriesKey(f.Desc, x)] = true
			}
		}
	}
}

// SnapshotObserver is told every snapshot a health source makes (a View).
type SnapshotObserver interface {
	Observe(*snapshot.Snapshot)
}

func seriesKey(d *snapshot.Desc, x snapshot.Sample) string {
	return d.Name + "\xff" + strings.Join(x.LabelValues, "\xff")
}
