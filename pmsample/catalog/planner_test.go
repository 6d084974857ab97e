package catalog

import (
	"bufio"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// tableHost is a MetricHost over the GH100 catalog with a passes function chosen by the test.
type tableHost struct {
	bases  []BaseMetric
	props  map[string]pmdata.Properties
	passes func(metrics []string) (int, error)
	calls  int
}

var testSubMetrics = map[pmdata.MetricType][]string{
	pmdata.TypeCounter:    {"sum", "avg", "max", "min", "sum.per_second", "avg.pct_of_peak_sustained_elapsed", "sum.pct_of_peak_sustained_elapsed"},
	pmdata.TypeRatio:      {"ratio", "pct", "max_rate"},
	pmdata.TypeThroughput: {"avg.pct_of_peak_sustained_elapsed", "max.pct_of_peak_sustained_elapsed"},
}

func gh100Host(t testing.TB, passes func([]string) (int, error)) *tableHost {
	t.Helper()
	f, err := os.Open("../../testdata/gh100_pm_sampling_base_metrics.tsv")
	if err != nil {
		t.Fatalf("opening the GH100 catalog: %v", err)
	}
	defer f.Close()
	h := &tableHost{props: map[string]pmdata.Properties{}, passes: passes}
	types := map[string]pmdata.MetricType{"counter": pmdata.TypeCounter, "ratio": pmdata.TypeRatio, "throughput": pmdata.TypeThroughput}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 4 {
			t.Fatalf("bad catalog line %q", sc.Text())
		}
		if _, dup := h.props[c[1]]; dup {
			continue
		}
		h.bases = append(h.bases, BaseMetric{Name: c[1], Type: types[c[0]]})
		h.props[c[1]] = pmdata.Properties{Type: types[c[0]], HWUnit: c[2], DimUnit: c[3]}
	}
	if len(h.bases) < 1000 {
		t.Fatalf("catalog has %d base metrics, want the GH100 list", len(h.bases))
	}
	return h
}

func (h *tableHost) BaseMetrics() ([]BaseMetric, error) { return h.bases, nil }
func (h *tableHost) SubMetrics(b BaseMetric) ([]string, error) {
	return testSubMetrics[b.Type], nil
}
func (h *tableHost) Properties(name string) (pmdata.Properties, error) {
	b, _ := splitName(name)
	p, ok := h.props[b]
	if !ok {
		return p, errors.New("invalid metric name")
	}
	return p, nil
}
func (h *tableHost) Passes(ms []string) (int, error) { h.calls++; return h.passes(ms) }
func (h *tableHost) SinglePassSet(string) ([]string, error) {
	return nil, ErrNoSinglePassSets
}

// weightPasses: sm__throughput needs 19 passes; otherwise each metric costs its weight (default
// 1) and a pass holds 3.
func weightPasses(weights map[string]int) func([]string) (int, error) {
	return func(ms []string) (int, error) {
		sum := 0
		for _, m := range ms {
			if strings.HasPrefix(m, "sm__throughput.") {
				return 19, nil
			}
			w := weights[m]
			if w == 0 {
				w = 1
			}
			sum += w
		}
		return (sum + 2) / 3, nil
	}
}

const (
	mGr     = "gr__cycles_active.avg.pct_of_peak_sustained_elapsed"
	mSM     = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	mDram   = "dram__cycles_active.avg.pct_of_peak_sustained_elapsed"
	mPCIeRx = "pcie__read_bytes.sum"
	mPCIeTx = "pcie__write_bytes.sum"
)

func TestPlanGreedyFirstFit(t *testing.T) {
	h := gh100Host(t, weightPasses(map[string]int{mDram: 2}))
	p, err := NewPlanner(h)
	if err != nil {
		t.Fatal(err)
	}
	// gr+sm = 2; dram (2) does not fit (4 > 3); pcie rx fits the first group (3).
	res, err := p.Plan([]string{mGr, mSM, mDram, mPCIeRx, mGr}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 1 || !slices.Equal(res.Groups[0].Metrics, []string{mGr, mSM, mPCIeRx}) {
		t.Fatalf("groups = %+v, want one group [gr sm pcie]", res.Groups)
	}
	if len(res.Rejected) != 1 || res.Rejected[0].Metric != mDram {
		t.Fatalf("rejected = %+v, want dram", res.Rejected)
	}
	// The same list with multiplexing opens a second group for dram, and pcie tx joins it.
	res, err = p.Plan([]string{mGr, mSM, mDram, mPCIeRx, mPCIeTx}, true, true)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{mGr, mSM, mPCIeRx}, {mDram, mPCIeTx}}
	if len(res.Groups) != 2 || !slices.Equal(res.Groups[0].Metrics, want[0]) || !slices.Equal(res.Groups[1].Metrics, want[1]) {
		t.Fatalf("groups = %+v, want %v", res.Groups, want)
	}
	// Strict without multiplexing: an explicit request that does not fit is an error.
	if _, err := p.Plan([]string{mGr, mSM, mDram}, false, true); err == nil || !strings.Contains(err.Error(), "does not fit in one pass") {
		t.Fatalf("strict plan error = %v, want 'does not fit in one pass'", err)
	}
}

func TestPlanRejectsMultiPassWithAlternatives(t *testing.T) {
	h := gh100Host(t, weightPasses(nil))
	p, err := NewPlanner(h)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Plan([]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, false, true)
	if err == nil {
		t.Fatal("planning a 19-pass metric succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"needs 19 passes", "single-pass alternatives", "sm__"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	// Every alternative is a one-pass sm metric.
	res, _ := p.Plan([]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed", mGr}, false, false)
	if len(res.Rejected) != 1 || len(res.Rejected[0].Alternatives) == 0 {
		t.Fatalf("rejected = %+v, want one with alternatives", res.Rejected)
	}
	for _, a := range res.Rejected[0].Alternatives {
		if n, _ := h.passes([]string{a}); n != 1 || !strings.HasPrefix(a, "sm__") {
			t.Errorf("alternative %q: passes %d, want a 1-pass sm__ metric", a, n)
		}
	}
	if len(res.Groups) != 1 || !slices.Equal(res.Groups[0].Metrics, []string{mGr}) {
		t.Fatalf("groups = %+v, want [gr]", res.Groups)
	}
}

func TestPlanUnknownNamesSuggest(t *testing.T) {
	h := gh100Host(t, weightPasses(nil))
	p, err := NewPlanner(h)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Plan([]string{"sm__cycles_activ.avg.pct_of_peak_sustained_elapsed"}, false, true)
	if err == nil || !strings.Contains(err.Error(), "unknown metric") || !strings.Contains(err.Error(), "sm__cycles_active") {
		t.Fatalf("error = %v, want unknown metric suggesting sm__cycles_active", err)
	}
	_, err = p.Plan([]string{"sm__cycles_active.avg.pct_of_peak_sustained_elapse"}, false, true)
	if err == nil || !strings.Contains(err.Error(), "unknown rollup") || !strings.Contains(err.Error(), mSM) {
		t.Fatalf("error = %v, want unknown rollup suggesting %s", err, mSM)
	}
	_, err = p.Plan([]string{"sm__cycles_active"}, false, true)
	if err == nil || !strings.Contains(err.Error(), "needs a rollup") {
		t.Fatalf("error = %v, want 'needs a rollup'", err)
	}
	if _, err := p.Plan(nil, false, false); err == nil {
		t.Fatal("empty plan succeeded")
	}
}

func TestPlanDottedBaseNames(t *testing.T) {
	base, rest := splitName("PCI.TriageCompute.pcie__read_bytes.sum.per_second")
	if base != "PCI.TriageCompute.pcie__read_bytes" || rest != "sum.per_second" {
		t.Fatalf("splitName = %q, %q", base, rest)
	}
	h := gh100Host(t, weightPasses(nil))
	p, _ := NewPlanner(h)
	res, err := p.Plan([]string{"PCI.TriageCompute.pcie__read_bytes.sum"}, false, true)
	if err != nil || len(res.Groups) != 1 {
		t.Fatalf("plan = %+v, %v", res, err)
	}
}

func TestPlanSet(t *testing.T) {
	h := gh100Host(t, weightPasses(nil))
	p, _ := NewPlanner(h)
	if _, err := p.PlanSet("triage"); !errors.Is(err, ErrNoSinglePassSets) {
		t.Fatalf("planSet error = %v, want ErrNoSinglePassSets", err)
	}
}

func TestDescribeAndList(t *testing.T) {
	h := gh100Host(t, weightPasses(nil))
	p, _ := NewPlanner(h)
	d, err := describe(p, "sm__throughput")
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != "throughput" || d.HWUnit != "sm" || d.Passes != 19 || len(d.SubMetrics) == 0 || !strings.HasPrefix(d.SubMetrics[0], "sm__throughput.") {
		t.Fatalf("describe = %+v", d)
	}
	if _, err := describe(p, "sm__nope"); err == nil {
		t.Fatal("describe of an unknown metric succeeded")
	}
	l, err := list(p)
	if err != nil || len(l) != len(h.bases) {
		t.Fatalf("list: %d entries, %v", len(l), err)
	}
}
