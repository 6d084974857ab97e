//go:build cgo

package catalog_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
)

func TestCatalogFakeLib(t *testing.T) {
	lib := pmtest.OpenFake(t)
	for _, target := range []string{"0", "GH100"} {
		c, err := catalog.Open(lib, target)
		if err != nil {
			t.Fatalf("catalog.Open(%s): %v", target, err)
		}
		defer c.Close()
		if c.Chip != "GH100" {
			t.Fatalf("chip = %q", c.Chip)
		}
		l, err := c.List()
		if err != nil || len(l) < 1000 {
			t.Fatalf("List: %d metrics, %v", len(l), err)
		}
	}
	c, err := catalog.Open(lib, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Greedy: 8 metrics fit a pass; the 9th and 10th do not.
	ms := pmtest.FakeMetrics(10)
	res, err := c.Plan(ms, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Groups) != 1 || !slices.Equal(res.Groups[0].Metrics, ms[:8]) || len(res.Rejected) != 2 {
		t.Fatalf("plan = %+v, want 8 metrics and 2 rejected", res)
	}
	res, err = c.Plan(ms, true)
	if err != nil || len(res.Groups) != 2 || !slices.Equal(res.Groups[1].Metrics, ms[8:]) {
		t.Fatalf("multiplexed plan = %+v, %v; want groups of 8 and 2", res, err)
	}
	// 19 passes: rejected with single-pass alternatives that really are one pass.
	res, _ = c.Plan([]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed", ms[0]}, false)
	if len(res.Rejected) != 1 || !strings.Contains(res.Rejected[0].Reason, "19 passes") || len(res.Rejected[0].Alternatives) == 0 {
		t.Fatalf("rejected = %+v, want the 19-pass metric with alternatives", res.Rejected)
	}
	for _, a := range res.Rejected[0].Alternatives {
		if r, err := c.Plan([]string{a}, false); err != nil || len(r.Rejected) != 0 {
			t.Errorf("alternative %s is not a one-pass metric: %+v %v", a, r, err)
		}
	}
	d, err := c.Describe("sm__throughput.avg.pct_of_peak_sustained_elapsed")
	if err != nil || d.Passes != 19 || len(d.SubMetrics) == 0 {
		t.Fatalf("describe = %+v, %v", d, err)
	}
	if _, err := c.Describe("sm__cycles_activ"); err == nil || !strings.Contains(err.Error(), "sm__cycles_active") {
		t.Fatalf("describe of a misspelt name: %v, want a suggestion", err)
	}
}

func TestCatalogSinglePassSets(t *testing.T) {
	cuptitest.Build(t)
	cuptitest.Inject(t, "version=130200")
	lib := pmtest.OpenFake(t)
	c, err := catalog.Open(lib, "GH100")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sets, err := c.SinglePassSets()
	if err != nil || len(sets) != 2 || sets[0].Name != "TriageCompute" || !slices.Equal(sets[0].Metrics, pmtest.FakeTriageCompute) ||
		sets[1].Name != "Throughput" || len(sets[1].Metrics) != 5 {
		t.Fatalf("SinglePassSets = %+v, %v", sets, err)
	}
	p, err := c.PlanSet("Throughput")
	if err != nil || len(p.Groups) != 1 || !slices.Equal(p.Groups[0].Metrics, sets[1].Metrics) {
		t.Fatalf("PlanSet = %+v, %v", p, err)
	}

	cuptitest.SetFaults(t, "") // 13.0: no sets, and no error for listing them
	lib13 := pmtest.OpenFake(t)
	c13, err := catalog.Open(lib13, "GH100")
	if err != nil {
		t.Fatal(err)
	}
	defer c13.Close()
	if sets, err := c13.SinglePassSets(); err != nil || sets != nil {
		t.Errorf("SinglePassSets on 13.0 = %+v, %v", sets, err)
	}
}
