package aggregate

import (
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/guard"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var testDevice = pmdata.Device{Index: 0, UUID: "GPU-0000", Model: "NVIDIA H200", Chip: "GH100", PCIBusID: "0000:19:00.0"}

var testCatalog = []pmdata.CatalogEntry{
	{Name: pmtest.SM, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "sm", DimUnit: "gpc_cycle"}},
	{Name: pmtest.PCIeRx, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"}},
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTestAggregator(t testing.TB, opts ...Option) (*Aggregator, *mapping.Mapper, *fakeClock) {
	t.Helper()
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{t: time.Unix(1795299125, 0)}
	opts = append([]Option{WithClock(clk.now), WithWindow(10 * time.Second)}, opts...)
	return New(m, []pmdata.Device{testDevice}, testCatalog, nil, opts...), m, clk
}

// mapped returns how the mapper names a catalog metric, checking its kind.
func mappedAs(t testing.TB, m *mapping.Mapper, name string, kind snapshot.Kind) mapping.Metric {
	t.Helper()
	for _, e := range testCatalog {
		if e.Name == name {
			mm, err := m.Map(name, e.Properties)
			if err != nil {
				t.Fatalf("mapping %s: %v", name, err)
			}
			if mm.Desc.Kind != kind {
				t.Fatalf("%s maps to a %v, want %v", name, mm.Desc.Kind, kind)
			}
			return mm
		}
	}
	t.Fatalf("%s not in the test catalog", name)
	return mapping.Metric{}
}

// value finds the series of family name whose label values start with prefix.
func value(t testing.TB, s *snapshot.Snapshot, name string, extra ...string) (float64, bool) {
	t.Helper()
	return pmtest.ValueOf(s, testDevice, name, extra...)
}

func mustValue(t testing.TB, s *snapshot.Snapshot, name string, extra ...string) float64 {
	t.Helper()
	v, ok := value(t, s, name, extra...)
	if !ok {
		t.Fatalf("no series %s%v in snapshot", name, extra)
	}
	return v
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

const sec = uint64(time.Second)

func TestAggregatorTotalsAndWindow(t *testing.T) {
	a, m, clk := newTestAggregator(t, WithWindowMin(true), WithTiming(true))
	sm := mappedAs(t, m, pmtest.SM, snapshot.KindGauge)
	rx := mappedAs(t, m, pmtest.PCIeRx, snapshot.KindCounter)
	rxLabels := labelValues(rx)
	t0 := uint64(clk.now().UnixNano())
	metrics := []string{pmtest.SM, pmtest.PCIeRx}
	// Batch 1: 1 s at 50%, 3 s at 90% (weights 1 and 3), pcie 100 + 300 bytes; one NaN sample,
	// one zero-length sample, one first sample dropped by the source.
	a.Add(pmdata.Batch{Device: 0, Metrics: metrics, DroppedFirst: 1, DecodeDuration: 20 * time.Millisecond, Samples: []pmdata.Sample{
		{Start: t0, End: t0 + sec, Values: []float64{50, 100}},
		{Start: t0 + sec, End: t0 + 4*sec, Values: []float64{90, 300}},
		{Start: t0 + 4*sec, End: t0 + 4*sec, Values: []float64{10, 1}},
		{Start: t0 + 4*sec, End: t0 + 5*sec, Values: []float64{math.NaN(), 1}},
	}})
	s := a.Snapshot()
	wantMean := (50*1 + 90*3) / 4.0 * sm.Scale
	if v := mustValue(t, s, sm.Desc.Name, labelValues(sm)...); !near(v, wantMean) {
		t.Errorf("%s = %v, want %v", sm.Desc.Name, v, wantMean)
	}
	if v := mustValue(t, s, sm.Max.Name, labelValues(sm)...); !near(v, 90*sm.Scale) {
		t.Errorf("max = %v, want %v", v, 90*sm.Scale)
	}
	if v := mustValue(t, s, sm.Min.Name, labelValues(sm)...); !near(v, 50*sm.Scale) {
		t.Errorf("min = %v, want %v", v, 50*sm.Scale)
	}
	if v := mustValue(t, s, rx.Desc.Name, rxLabels...); !near(v, 400*rx.Scale) {
		t.Errorf("%s = %v, want %v", rx.Desc.Name, v, 400*rx.Scale)
	}
	if v := mustValue(t, s, "cupti_pm_samples_total"); v != 2 {
		t.Errorf("samples = %v, want 2", v)
	}
	if v := mustValue(t, s, "cupti_pm_samples_dropped_total", "invalid"); v != 2 {
		t.Errorf("invalid = %v, want 2", v)
	}
	if v := mustValue(t, s, "cupti_pm_samples_dropped_total", "first_sample"); v != 1 {
		t.Errorf("first_sample = %v, want 1", v)
	}
	if v := mustValue(t, s, "cupti_pm_decode_duration_seconds"); v != 0.02 {
		t.Errorf("decode duration = %v, want 0.02", v)
	}
	if v := mustValue(t, s, "cupti_pm_last_sample_timestamp_seconds"); !near(v, float64(t0+4*sec)/1e9) {
		t.Errorf("last sample = %v", v)
	}

	// Batch 2, 12 s later: 2 s at 10%. Batch 1 ended at t0+4s <= t0+14s-10s: it leaves the
	// window; the counter keeps its total.
	clk.add(time.Second)
	// 1 s lost to a full image, 2 s to an overflow, 4 s unexplained: at a 1 s interval, 7 samples.
	a.Add(pmdata.Batch{Device: 0, Metrics: metrics, LostImageFull: 1, Overflows: 1, DecodeErrors: 2, Interval: time.Second,
		Lost: []pmdata.Loss{{Reason: "image_full", Start: t0 + 5*sec, End: t0 + 6*sec, Samples: 1},
			{Reason: "overflow", Start: t0 + 6*sec, End: t0 + 8*sec, Samples: 2},
			{Reason: "gap", Start: t0 + 8*sec, End: t0 + 12*sec, Samples: 4}},
		Samples: []pmdata.Sample{
			{Start: t0 + 12*sec, End: t0 + 14*sec, Values: []float64{10, 5}},
		}})
	s = a.Snapshot()
	for name, want := range map[string]float64{sm.Desc.Name: 10 * sm.Scale, sm.Max.Name: 10 * sm.Scale, sm.Min.Name: 10 * sm.Scale} {
		if v := mustValue(t, s, name, labelValues(sm)...); !near(v, want) {
			t.Errorf("after expiry %s = %v, want %v", name, v, want)
		}
	}
	if v := mustValue(t, s, rx.Desc.Name, rxLabels...); !near(v, 405*rx.Scale) {
		t.Errorf("total = %v, want %v", v, 405*rx.Scale)
	}
	for reason, want := range map[string]float64{"image_full": 1, "overflow": 1, "decode_error": 2} {
		if v := mustValue(t, s, "cupti_pm_decode_failures_total", reason); v != want {
			t.Errorf("decode failures{%s} = %v, want %v", reason, v, want)
		}
	}
	for reason, want := range map[string]float64{"image_full": 1, "overflow": 2, "gap": 4} {
		if v := mustValue(t, s, "cupti_pm_samples_lost_total", reason); v != want {
			t.Errorf("lost samples{%s} = %v, want %v", reason, v, want)
		}
		if v := mustValue(t, s, "cupti_pm_lost_seconds_total", reason); v != want {
			t.Errorf("lost seconds{%s} = %v, want %v", reason, v, want)
		}
	}
	// A reason has no series before its first loss (the series budget, docs/sizing.md).
	for _, f := range s.Families {
		for _, x := range f.Samples {
			if f.Desc.Name == "cupti_pm_samples_lost_total" && (slices.Contains(x.LabelValues, "paused") || slices.Contains(x.LabelValues, "stall")) {
				t.Errorf("a series with nothing lost: %v", x)
			}
		}
	}
	// Window [t0+4s, t0+14s]: the 2 s sample is covered; the 7 s lost were not (buckets are
	// whole batches: batch 1 left the window, the losses of batch 2 are in it).
	if v := mustValue(t, s, "cupti_pm_window_coverage_ratio"); !near(v, 2.0/9) {
		t.Errorf("coverage = %v, want 2/9", v)
	}
	if v := mustValue(t, s, "cupti_pm_sampling_interval_seconds"); v != 1 {
		t.Errorf("interval = %v, want 1", v)
	}
	if v := mustValue(t, s, "cupti_pm_overflows_total"); v != 1 {
		t.Errorf("overflows = %v, want 1", v)
	}

	// Without batches for longer than the window the gauges disappear; counters stay.
	clk.add(11 * time.Second)
	s = a.Snapshot()
	if _, ok := value(t, s, sm.Desc.Name, labelValues(sm)...); ok {
		t.Error("stale gauge still published")
	}
	if _, ok := value(t, s, rx.Desc.Name, rxLabels...); !ok {
		t.Error("counter vanished with the window")
	}
}

func labelValues(m mapping.Metric) []string {
	var out []string
	for _, l := range m.Labels {
		out = append(out, l.Value)
	}
	return out
}

func TestAggregatorObservedRatioAndState(t *testing.T) {
	status := []pmdata.DeviceStatus{{Device: 0, State: pmdata.StateBusy, Reason: "busy"}}
	a, _, clk := newTestAggregator(t, WithStatus(func() []pmdata.DeviceStatus { return status }), WithZeroReasons(true))
	t0 := uint64(clk.now().UnixNano())
	// Two groups take turns: sm for 1 s, pcie for 1 s, sm for 1 s, pcie for 1 s.
	for i := range uint64(4) {
		name := []string{pmtest.SM, pmtest.PCIeRx}[i%2]
		a.Add(pmdata.Batch{Device: 0, Metrics: []string{name}, Multiplexed: true, Samples: []pmdata.Sample{
			{Start: t0 + i*sec, End: t0 + (i+1)*sec, Values: []float64{1}},
		}})
	}
	s := a.Snapshot()
	for _, name := range []string{pmtest.SM, pmtest.PCIeRx} {
		if v := mustValue(t, s, "cupti_pm_observed_ratio", name); !near(v, 0.5) {
			t.Errorf("observed{%s} = %v, want 0.5", name, v)
		}
	}
	for _, st := range pmdata.States {
		want := b2f(st == pmdata.StateBusy)
		if v := mustValue(t, s, "cupti_pm_sampling_state", string(st)); v != want {
			t.Errorf("state{%s} = %v, want %v", st, v, want)
		}
	}
}

func TestAggregatorSnapshotImmutable(t *testing.T) {
	a, _, clk := newTestAggregator(t)
	t0 := uint64(clk.now().UnixNano())
	a.Add(pmdata.Batch{Device: 0, Metrics: []string{pmtest.PCIeRx}, Samples: []pmdata.Sample{{Start: t0, End: t0 + sec, Values: []float64{1}}}})
	s1 := a.Snapshot()
	before := mustValue(t, s1, "cupti_pm_samples_total")
	a.Add(pmdata.Batch{Device: 0, Metrics: []string{pmtest.PCIeRx}, Samples: []pmdata.Sample{{Start: t0 + sec, End: t0 + 2*sec, Values: []float64{1}}}})
	if v := mustValue(t, s1, "cupti_pm_samples_total"); v != before {
		t.Fatalf("old snapshot changed: %v -> %v", before, v)
	}
	if v := mustValue(t, a.Snapshot(), "cupti_pm_samples_total"); v != 2 {
		t.Fatalf("new snapshot samples = %v, want 2", v)
	}
}

func TestAggregatorConcurrentSafe(t *testing.T) {
	devs := []pmdata.Device{testDevice, {Index: 1, UUID: "GPU-1"}}
	m, _ := mapping.New()
	a := New(m, devs, testCatalog, nil)
	var wg sync.WaitGroup
	for d := range 2 {
		wg.Go(func() {
			for i := range uint64(200) {
				start := uint64(time.Now().UnixNano()) + i*sec
				a.Add(pmdata.Batch{Device: d, Metrics: []string{pmtest.SM, pmtest.PCIeRx}, Samples: []pmdata.Sample{{Start: start, End: start + sec, Values: []float64{1, 2}}}})
			}
		})
	}
	wg.Go(func() {
		for range 500 {
			s := a.Snapshot()
			for _, f := range s.Families {
				_ = len(f.Samples)
			}
		}
	})
	wg.Wait()
	s := a.Snapshot()
	total := 0.0
	for _, f := range s.Families {
		if f.Desc.Name == "cupti_pm_samples_total" {
			for _, x := range f.Samples {
				total += x.Value
			}
		}
	}
	if total != 400 {
		t.Fatalf("samples_total over devices = %v, want 400", total)
	}
}

// BenchmarkAggregate reports the cost of one sample of 9 metrics (one batch of 250 samples
// per op, as one 250 ms decode at 1 kHz produces; ns/op divided by 250 is the per-sample cost).
func BenchmarkAggregate(b *testing.B) {
	m, _ := mapping.New()
	names := []string{pmtest.SM, pmtest.PCIeRx, pmtest.Gr, pmtest.Dram, pmtest.PCIeTx, "nvlrx__bytes.sum", "nvltx__bytes.sum", "sm__inst_executed.sum", "dram__bytes_read.sum"}
	a := New(m, []pmdata.Device{testDevice}, nil, nil)
	vals := make([]float64, len(names))
	for i := range vals {
		vals[i] = float64(i)
	}
	start := uint64(time.Now().UnixNano())
	samples := make([]pmdata.Sample, 250)
	b.ReportAllocs()
	for b.Loop() {
		for i := range samples {
			samples[i] = pmdata.Sample{Start: start, End: start + 1e6, Values: vals}
			start += 1e6
		}
		a.Add(pmdata.Batch{Device: 0, Metrics: names, Samples: samples})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(samples)), "ns/sample")
}

// Time inside CUPTI calls adds up per call, so a GPU run can tell CUPTI's cost from the exporter's.
func TestAggregatorCUPTICallTimes(t *testing.T) {
	a, _, _ := newTestAggregator(t, WithTiming(true))
	for range 3 {
		a.Add(pmdata.Batch{Device: 0, CUPTITime: pmdata.CallTimes{Decode: 20 * time.Millisecond, SampleInfo: 2 * time.Millisecond,
			Evaluate: 30 * time.Millisecond, Reset: time.Millisecond}})
	}
	s := a.Snapshot()
	for call, want := range map[string]float64{"decode": 0.060, "sample_info": 0.006, "evaluate": 0.090, "reset": 0.003} {
		if got := mustValue(t, s, "cupti_pm_cupti_call_seconds_total", call); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v s, want %v", call, got, want)
		}
	}
}

// By default a device serves no window minimum, no decode timings, only the current sampling
// state, and a loss, drop or failure reason's series from its first event on (docs/sizing.md
// "An idle GPU"); WithZeroReasons serves every reason from the start, at 0.
func TestAggregatorIdleSeriesByDefault(t *testing.T) {
	status := []pmdata.DeviceStatus{{Device: 0, State: pmdata.StateSampling}}
	for _, zero := range []bool{false, true} {
		a, m, clk := newTestAggregator(t, WithStatus(func() []pmdata.DeviceStatus { return status }), WithZeroReasons(zero))
		sm := mappedAs(t, m, pmtest.SM, snapshot.KindGauge)
		t0 := uint64(clk.now().UnixNano())
		a.Add(pmdata.Batch{Device: 0, Metrics: []string{pmtest.SM}, DroppedFirst: 1, DecodeDuration: time.Millisecond,
			CUPTITime: pmdata.CallTimes{Decode: time.Millisecond},
			Samples:   []pmdata.Sample{{Start: t0, End: t0 + sec, Values: []float64{50}}}})
		s := a.Snapshot()
		if _, ok := value(t, s, sm.Desc.Name, labelValues(sm)...); !ok {
			t.Fatalf("zero=%v: no %s", zero, sm.Desc.Name)
		}
		for _, absent := range [][]string{{sm.Min.Name}, {"cupti_pm_decode_duration_seconds"}, {"cupti_pm_cupti_call_seconds_total", "decode"},
			{"cupti_pm_last_sample_timestamp_seconds"}} {
			if _, ok := value(t, s, absent[0], absent[1:]...); ok {
				t.Errorf("zero=%v: %v served without its option", zero, absent)
			}
		}
		if v := mustValue(t, s, "cupti_pm_samples_dropped_total", "first_sample"); v != 1 {
			t.Errorf("first_sample = %v, want 1", v)
		}
		for _, zeroSeries := range [][]string{{"cupti_pm_samples_dropped_total", "invalid"}, {"cupti_pm_decode_failures_total", "image_full"},
			{"cupti_pm_samples_lost_total", "gap"}, {"cupti_pm_lost_seconds_total", "stall"}, {"cupti_pm_overflows_total"},
			{"cupti_pm_sampling_state", string(pmdata.StateBusy)}} {
			if v, ok := value(t, s, zeroSeries[0], zeroSeries[1:]...); ok != zero || v != 0 {
				t.Errorf("zero=%v: %v = %v, served %v", zero, zeroSeries, v, ok)
			}
		}
		if v := mustValue(t, s, "cupti_pm_sampling_state", string(pmdata.StateSampling)); v != 1 {
			t.Errorf("state sampling = %v", v)
		}
		// The first gap brings its series, in samples and seconds.
		a.Add(pmdata.Batch{Device: 0, Metrics: []string{pmtest.SM}, Interval: time.Second,
			Lost:    []pmdata.Loss{{Reason: "gap", Start: t0 + sec, End: t0 + 3*sec, Samples: 2}},
			Samples: []pmdata.Sample{{Start: t0 + 3*sec, End: t0 + 4*sec, Values: []float64{50}}}})
		s = a.Snapshot()
		if v := mustValue(t, s, "cupti_pm_samples_lost_total", "gap"); v != 2 {
			t.Errorf("zero=%v: lost gap = %v, want 2", zero, v)
		}
		if v := mustValue(t, s, "cupti_pm_lost_seconds_total", "gap"); v != 2 {
			t.Errorf("zero=%v: lost seconds gap = %v, want 2", zero, v)
		}
	}
}

// The aggregator counts the guard's rejections as dropped and lost, by metric, and the window
// statistics never see them.
func TestAggregatorCountsOutOfRange(t *testing.T) {
	const ms = uint64(time.Millisecond)
	a, m, _ := newTestAggregator(t)
	metrics := []string{pmtest.SM}
	b := pmdata.Batch{Device: 0, Metrics: metrics, Interval: time.Millisecond, Samples: []pmdata.Sample{
		{Start: 1 * ms, End: 2 * ms, Values: []float64{50}},
		{Start: 2 * ms, End: 3 * ms, Values: []float64{106300}},
		{Start: 3 * ms, End: 4 * ms, Values: []float64{60}},
	}}
	guard.New("GH100", metrics).Screen(&b)
	a.Add(b)
	s := a.Snapshot()
	for _, c := range []struct {
		name  string
		extra []string
		want  float64
	}{
		{"cupti_pm_samples_dropped_total", []string{"out_of_range"}, 1},
		{"cupti_pm_samples_out_of_range_total", []string{pmtest.SM}, 1},
		{"cupti_pm_samples_lost_total", []string{"out_of_range"}, 1},
		{"cupti_pm_samples_total", nil, 2},
	} {
		if v, ok := value(t, s, c.name, c.extra...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.extra, v, ok, c.want)
		}
	}
	mm := mappedAs(t, m, pmtest.SM, snapshot.KindGauge)
	if v, ok := value(t, s, mm.Max.Name); !ok || v != 60*mm.Scale {
		t.Errorf("max = %v (present %v), want %v", v, ok, 60*mm.Scale)
	}
}

// While a device is released (pmsample's idle release) no batch arrives: the window
// statistics must vanish (no value), not read 0, and after reacquiring the mean covers only
// sampled time (no zeros averaged in).
func TestReleaseWindowReportsNoZeros(t *testing.T) {
	a, m, clk := newTestAggregator(t)
	sm := mappedAs(t, m, pmtest.SM, snapshot.KindGauge)
	busy := func(v float64) pmdata.Batch {
		t0 := uint64(clk.now().UnixNano())
		b := pmdata.Batch{Device: 0, Metrics: []string{pmtest.SM}}
		for i := range uint64(100) {
			s := t0 + i*uint64(time.Millisecond)
			b.Samples = append(b.Samples, pmdata.Sample{Start: s, End: s + uint64(time.Millisecond), Values: []float64{v}})
		}
		return b
	}
	a.Add(busy(80))
	if v, ok := value(t, a.Snapshot(), sm.Desc.Name, labelValues(sm)...); !ok || !near(v, 80*sm.Scale) {
		t.Fatalf("mean while sampling = %v %v", v, ok)
	}
	// Released for 30 s: no batch; past the window the gauge is absent, never 0.
	clk.add(30 * time.Second)
	if v, ok := value(t, a.Snapshot(), sm.Desc.Name, labelValues(sm)...); ok {
		t.Fatalf("mean after 30 s released = %v, want absent", v)
	}
	// Reacquired: the new samples alone make the mean, no zeros averaged in.
	a.Add(busy(40))
	if v, ok := value(t, a.Snapshot(), sm.Desc.Name, labelValues(sm)...); !ok || !near(v, 40*sm.Scale) {
		t.Fatalf("mean after reacquire = %v %v, want %v", v, ok, 40*sm.Scale)
	}
}
