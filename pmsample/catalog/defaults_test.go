package catalog

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

const fp16 = "sm__inst_executed_pipe_fma_type_fp16.avg.pct_of_peak_sustained_elapsed"

// gh100Passes models what an H200 measured: the curated GH100 names fit one pass together
// except FP16, which needs a second one beside the others.
func gh100Passes(ms []string) (int, error) {
	if slices.Contains(ms, fp16) && len(ms) > 1 {
		return 2, nil
	}
	return 1, nil
}

func curated(t *testing.T) []mapping.CuratedMetric {
	t.Helper()
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	return m.Curated()
}

func choice(t *testing.T, set DefaultSet, name string) DefaultChoice {
	t.Helper()
	for _, c := range set.Choices {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no choice for %s in %+v", name, set.Choices)
	return DefaultChoice{}
}

// TestResolveDefaultsGH100 keeps GH100's default set: every curated GH100 name but FP16, which
// the pass budget drops, as before per-chip resolution.
func TestResolveDefaultsGH100(t *testing.T) {
	cur := curated(t)
	p, err := NewPlanner(gh100Host(t, gh100Passes))
	if err != nil {
		t.Fatal(err)
	}
	set, err := p.resolveDefaults("GH100", cur)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range cur {
		if c.Perfworks != fp16 {
			want = append(want, c.Perfworks)
		}
	}
	if got := set.Metrics(); !slices.Equal(got, want) {
		t.Errorf("GH100 default set\n got %q\nwant %q", got, want)
	}
	if set.Passes != 1 {
		t.Errorf("passes %d, want 1", set.Passes)
	}
	c := choice(t, set, "cupti_fp16_pipe_active_ratio")
	if c.Missing != MissingPassBudget || c.Headline {
		t.Errorf("FP16: %+v, want left out for the pass budget, not a headline metric", c)
	}
}

// without returns the GH100 host less the base metrics drop says.
func without(h *tableHost, drop func(string) bool) *tableHost {
	h.bases = slices.DeleteFunc(h.bases, func(b BaseMetric) bool { return drop(b.Name) })
	return h
}

// TestResolveDefaultsOtherNames: a chip without the TriageCompute names resolves to the next
// candidates its catalog has, under the same series.
func TestResolveDefaultsOtherNames(t *testing.T) {
	h := without(gh100Host(t, gh100Passes), func(n string) bool { return strings.Contains(n, "TriageCompute.") })
	p, err := NewPlanner(h)
	if err != nil {
		t.Fatal(err)
	}
	set, err := p.resolveDefaults("GA102", curated(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"cupti_graphics_engine_active_ratio":     "gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
		"cupti_sm_active_ratio":                  "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
		"cupti_tensor_pipe_active_ratio":         "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
		`cupti_pcie_bytes_total{direction="rx"}`: "pcie__read_bytes.sum",
		"cupti_fp64_pipe_active_ratio":           "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed",
	} {
		if c := choice(t, set, name); c.Perfworks != want {
			t.Errorf("%s: chose %q (%s), want %s", name, c.Perfworks, c.Reason, want)
		}
	}
}

// TestResolveDefaultsReasons: each way a metric is left out gets its reason, and a candidate
// that needs more passes alone gives way to the next.
func TestResolveDefaultsReasons(t *testing.T) {
	sm := "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	h := without(gh100Host(t, nil), func(n string) bool { return strings.HasPrefix(n, "nvlrx__") })
	h.passes = func(ms []string) (int, error) {
		switch {
		case slices.Contains(ms, sm):
			return 2, nil // the GH100 name costs two passes here: the next candidate is used
		case slices.Contains(ms, "nvltx__bytes.sum"):
			return 0, errors.New("CUPTI_ERROR_UNKNOWN")
		case slices.ContainsFunc(ms, func(m string) bool { return strings.Contains(m, "fp64") }):
			return 3, nil
		}
		return gh100Passes(ms)
	}
	p, err := NewPlanner(h)
	if err != nil {
		t.Fatal(err)
	}
	set, err := p.resolveDefaults("GH100", curated(t))
	if err != nil {
		t.Fatal(err)
	}
	if c := choice(t, set, "cupti_sm_active_ratio"); c.Perfworks != "sm__cycles_active.avg.pct_of_peak_sustained_elapsed" {
		t.Errorf("SM active: %+v, want the plain name after the two-pass GH100 one", c)
	}
	for name, want := range map[string]MissingReason{
		`cupti_nvlink_bytes_total{direction="rx"}`: MissingFromCatalog,
		`cupti_nvlink_bytes_total{direction="tx"}`: MissingUnusable,
		"cupti_fp64_pipe_active_ratio":             MissingMultiPass,
		"cupti_fp16_pipe_active_ratio":             MissingPassBudget,
	} {
		if c := choice(t, set, name); c.Missing != want || c.Reason == "" || c.Perfworks != "" {
			t.Errorf("%s: %+v, want left out as %s with a reason", name, c, want)
		}
	}
	if set.Passes != 1 {
		t.Errorf("passes %d, want 1", set.Passes)
	}
}

// TestPlanDefaults: without multiplexing the plan is the resolved set and the left-out
// metrics are its rejections; with it, the metric dropped for the pass budget gets a group.
func TestPlanDefaults(t *testing.T) {
	cur := curated(t)
	p, err := NewPlanner(gh100Host(t, gh100Passes))
	if err != nil {
		t.Fatal(err)
	}
	plan, set, err := p.PlanDefaults("GH100", cur, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 1 || !slices.Equal(plan.Groups[0].Metrics, set.Metrics()) {
		t.Errorf("plan %+v, want the resolved set in one group", plan.Groups)
	}
	if len(plan.Rejected) != 1 || plan.Rejected[0].Metric != "cupti_fp16_pipe_active_ratio" {
		t.Errorf("rejected %+v, want FP16", plan.Rejected)
	}
	plan, _, err = p.PlanDefaults("GH100", cur, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Groups) != 2 || !slices.Equal(plan.Groups[1].Metrics, []string{fp16}) || len(plan.Rejected) != 0 {
		t.Errorf("multiplexed plan %+v rejected %+v, want FP16 alone in a second group", plan.Groups, plan.Rejected)
	}
}

func TestOneCandidateEach(t *testing.T) {
	cur := curated(t)
	if err := OneCandidateEach([]string{cur[1].Perfworks, "dram__bytes_read.sum"}, cur); err != nil {
		t.Errorf("distinct metrics refused: %v", err)
	}
	err := OneCandidateEach([]string{cur[1].Candidates[0].Perfworks, cur[1].Candidates[len(cur[1].Candidates)-1].Perfworks}, cur)
	if err == nil || !strings.Contains(err.Error(), "cupti_sm_active_ratio") {
		t.Errorf("two candidates of SM active: err %v, want a refusal naming the series", err)
	}
}
