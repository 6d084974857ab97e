package attribution

import (
	"math"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Metrics of the tests: a ratio (percent) and a byte counter, as the curated table maps them.
const (
	smActive = "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	pcieRead = "PCI.TriageCompute.pcie__read_bytes.sum"
	// grActive is the graphics engine's activity, which the default set holds beside the
	// context-switch counter (the simulations with switches send it).
	grActive = "FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed"
)

var (
	testMetrics = []string{smActive, pcieRead}
	testCatalog = []pmdata.CatalogEntry{
		{Name: smActive, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "sm", DimUnit: "gpc_cycle"}},
		{Name: pcieRead, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"}},
		{Name: grActive, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "gr", DimUnit: "gpc_cycle"}},
	}
	testDevices = []pmdata.Device{{Index: 0, UUID: "GPU-aaaa"}, {Index: 1, UUID: "GPU-bbbb"}}
)

// t0 is the start of every test timeline (ns, CUPTI time base).
const t0 = int64(1_795_299_120_000_000_000)

const ms = int64(time.Millisecond)

// fakeClock is a settable wall clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) set(ns int64)            { c.t = time.Unix(0, ns) }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newTest(t testing.TB, opts ...Option) (*Attributor, *fakeClock) {
	t.Helper()
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{}
	clk.set(t0)
	a, err := New(testDevices, testCatalog, m, nil, append([]Option{WithClock(clk.now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a, clk
}

func newProc(pid uint32, pod string, gpus ...string) (*record.Process, activity.ProcessInfo) {
	p := &record.Process{PID: pid}
	info := activity.ProcessInfo{Pod: pod, Namespace: "ns", Container: "c", GPUs: gpus}
	if pod == "" {
		info.Namespace, info.Container = "", ""
	}
	return p, info
}

func kernel(dev uint32, name string, start, end int64) record.Record {
	return record.Record{Kind: record.KindKernel, Device: dev, Name: name, Start: uint64(start), End: uint64(end)}
}

// samples makes n contiguous samples of length step from start, values from f.
func samples(start, step int64, n int, f func(s, e int64) []float64) []pmdata.Sample {
	out := make([]pmdata.Sample, n)
	for i := range out {
		s := start + int64(i)*step
		out[i] = pmdata.Sample{Start: uint64(s), End: uint64(s + step), Values: f(s, s+step)}
	}
	return out
}

// value returns the value of family name with the given label values (nil: any), and
// whether it exists.
func value(snap *snapshot.Snapshot, name string, labels ...string) (float64, bool) {
	for _, f := range snap.Families {
		if f.Desc.Name != name {
			continue
		}
		for _, s := range f.Samples {
			if match(s.LabelValues, labels) {
				return s.Value, true
			}
		}
	}
	return 0, false
}

func match(got, want []string) bool {
	if len(want) > len(got) {
		return false
	}
	for i, w := range want {
		if w != "*" && got[i] != w {
			return false
		}
	}
	return true
}

// sum adds the values of family name whose labels match (prefix, "*" any).
func sum(snap *snapshot.Snapshot, name string, labels ...string) float64 {
	var t float64
	for _, f := range snap.Families {
		if f.Desc.Name != name {
			continue
		}
		for _, s := range f.Samples {
			if match(s.LabelValues, labels) {
				t += s.Value
			}
		}
	}
	return t
}

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
