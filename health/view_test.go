package health

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// snapSource hands out the snapshot it holds.
type snapSource struct{ s *snapshot.Snapshot }

func (s *snapSource) Snapshot() *snapshot.Snapshot { return s.s }

// viewSnapshot is one GPU's collection: idle (gpu_idle held, nothing else), some power-capped
// time, no ECC error, with throttled set: also held at sw_power_cap, sync_boost time and one
// corrected error.
func viewSnapshot(throttled bool) *snapshot.Snapshot {
	b := newBuilder(time.Unix(0, 0))
	dev := []string{"0", "GPU-1", "H200", "0000:19:00.0"}
	add := func(d *snapshot.Desc, v float64, extra ...string) {
		b.add(d, v, append(slices.Clone(dev), extra...)...)
	}
	add(memoryUsedDesc, 1)
	add(memoryFreeDesc, 2)
	add(bar1UsedDesc, 3)
	add(encUtilDesc, 0)
	for _, c := range clockDomains {
		add(clockDesc, 1e9, c.name)
		add(maxClockDesc, 2e9, c.name)
	}
	for _, r := range clockEventReasons {
		add(clockEventDesc, b01(r.name == "gpu_idle" || (throttled && r.name == "sw_power_cap")), r.name)
	}
	for _, p := range clockEventCounters {
		v := 0.0
		if p.name == "power" || (throttled && p.name == "sync_boost") {
			v = 1.5
		}
		add(violationDesc, v, p.name)
	}
	for _, e := range eccCounters {
		add(eccDesc, b01(throttled && e.typ == "corrected"), e.typ, e.counter)
	}
	return b.snapshot(time.Unix(1, 0))
}

// served lists a view snapshot's series as name{label values after the device's}.
func served(s *snapshot.Snapshot) []string {
	var out []string
	for _, f := range s.Families {
		for _, x := range f.Samples {
			out = append(out, f.Desc.Name+"{"+strings.Join(x.LabelValues[len(deviceLabels):], ",")+"}")
		}
	}
	slices.Sort(out)
	return out
}

func TestViewDefaults(t *testing.T) {
	src := &snapSource{s: viewSnapshot(false)}
	v := NewView(src)
	got := served(v.Snapshot())
	want := []string{
		"cupti_gpu_clock_event_reasons{gpu_idle}",
		"cupti_gpu_clock_event_seconds_total{hw_power_brake_slowdown}", "cupti_gpu_clock_event_seconds_total{hw_thermal_slowdown}",
		"cupti_gpu_clock_event_seconds_total{power}", "cupti_gpu_clock_event_seconds_total{thermal}",
		"cupti_gpu_clock_hertz{memory}", "cupti_gpu_clock_hertz{sm}",
		"cupti_gpu_ecc_errors_total{uncorrected,volatile}",
		"cupti_gpu_max_clock_hertz{sm}",
		"cupti_gpu_memory_used_bytes{}",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("idle GPU serves\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if first, again := v.Snapshot(), v.Snapshot(); first != again {
		t.Error("the same source snapshot was filtered twice")
	}
	// The first events bring their series; they stay when they are back at 0.
	src.s = viewSnapshot(true)
	got = served(v.Snapshot())
	for _, s := range []string{"cupti_gpu_clock_event_reasons{sw_power_cap}", "cupti_gpu_clock_event_seconds_total{sync_boost}", "cupti_gpu_ecc_errors_total{corrected,volatile}"} {
		if !slices.Contains(got, s) {
			t.Errorf("%s not served after its first event: %v", s, got)
		}
	}
	src.s = viewSnapshot(false)
	if again := served(v.Snapshot()); !slices.Contains(again, "cupti_gpu_clock_event_reasons{sw_power_cap}") {
		t.Errorf("sw_power_cap left when it stopped holding: %v", again)
	}
	if slices.Contains(got, "cupti_gpu_ecc_errors_total{corrected,aggregate}") {
		t.Error("lifetime ECC counts served without WithDetail")
	}
}

func TestViewEverything(t *testing.T) {
	src := &snapSource{s: viewSnapshot(false)}
	in := served(src.s)
	if got := served(NewView(src, WithDetail(true), WithZeroReasons(true)).Snapshot()); !slices.Equal(got, in) {
		t.Errorf("with every option the view serves\n%s\nwant the source's\n%s", strings.Join(got, "\n"), strings.Join(in, "\n"))
	}
	if NewView(&snapSource{}).Snapshot() != nil {
		t.Error("a view of a source without a snapshot is not nil")
	}
}

// atomicSource is a snapSource that may change while it is read.
type atomicSource struct {
	p atomic.Pointer[snapshot.Snapshot]
}

func (s *atomicSource) Snapshot() *snapshot.Snapshot { return s.p.Load() }

// Scrapes and OTLP read a view at once while the source publishes (go test -race).
func TestViewConcurrentSafe(t *testing.T) {
	src := &atomicSource{}
	v := NewView(src)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if s := v.Snapshot(); s != nil && len(s.Families) == 0 {
					t.Error("empty view snapshot")
					return
				}
			}
		})
	}
	for i := range 200 {
		src.p.Store(viewSnapshot(i%2 == 1))
	}
	wg.Wait()
	if got := served(v.Snapshot()); !slices.Contains(got, "cupti_gpu_clock_event_reasons{sw_power_cap}") {
		t.Errorf("sw_power_cap held once, not served: %v", got)
	}
}

// A reason that held only between two scrapes still appears, and which series a scrape
// serves does not depend on when the scrapes came: the source tells the view every snapshot.
func TestViewReasonBetweenScrapes(t *testing.T) {
	src := &snapSource{s: viewSnapshot(false)}
	v := NewView(src)
	v.Observe(src.s)
	before := served(v.Snapshot())
	// A collection held at sw_power_cap that no scrape saw, then back to idle.
	for _, throttled := range []bool{true, false} {
		src.s = viewSnapshot(throttled)
		v.Observe(src.s)
	}
	after := served(v.Snapshot())
	for _, s := range []string{"cupti_gpu_clock_event_reasons{sw_power_cap}", "cupti_gpu_clock_event_seconds_total{sync_boost}", "cupti_gpu_ecc_errors_total{corrected,volatile}"} {
		if slices.Contains(before, s) {
			t.Errorf("%s served before its first event", s)
		}
		if !slices.Contains(after, s) {
			t.Errorf("%s not served after an event no scrape saw: %v", s, after)
		}
	}
	// With the zeros on, nothing to remember: every series from the start.
	z := NewView(src, WithZeroReasons(true))
	z.Observe(viewSnapshot(true))
	if len(z.seen) != 0 {
		t.Errorf("WithZeroReasons: %d series remembered; want none", len(z.seen))
	}
}
