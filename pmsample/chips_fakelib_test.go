//go:build cgo

package pmsample

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// The fake serves a chip from a capture (`metrics chips --capture`) when given the knobs
// catalogs=DIR (the unpacked captures) and chip=NAME (the devices' chip): its catalog, and the
// pass counts CUPTI gave for it. A pass count the capture never measured is counted in the
// fake's passes_unknown and answered 2.

// resolveOn resolves the default set on chip with the fake serving dir's captures, and checks
// that every pass count came from the capture.
func resolveOn(t *testing.T, lib *cupti.Lib, dir, chip string) DefaultSet {
	t.Helper()
	cuptitest.Inject(t, "catalogs="+dir+",chip="+chip)
	unknown := cuptitest.Query(t, "passes_unknown")
	c, err := OpenCatalog(lib, chip)
	if err != nil {
		t.Fatalf("%s: OpenCatalog: %v", chip, err)
	}
	defer c.Close()
	set, err := c.DefaultSet(curated(t))
	if err != nil {
		t.Fatalf("%s: DefaultSet: %v", chip, err)
	}
	if n := cuptitest.Query(t, "passes_unknown") - unknown; n != 0 {
		t.Errorf("%s: %d pass counts asked that the capture never measured: recapture (scripts/gpu stage chips)", chip, n)
	}
	return set
}

// captured reads the resolved set and the left-out metrics a capture recorded.
func captured(t *testing.T, dir, chip string) (resolved []string, passes string, missing map[string]string) {
	t.Helper()
	read := func(kind string) [][]string {
		f, err := os.Open(filepath.Join(dir, chip+".passes"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		facts, err := ReadCaptureFacts(f, kind)
		if err != nil {
			t.Fatal(err)
		}
		return facts
	}
	r := read("resolved")
	if len(r) != 1 || len(r[0]) != 3 {
		t.Fatalf("%s: want one resolved line, got %q", chip, r)
	}
	missing = map[string]string{}
	for _, m := range read("missing") {
		missing[m[1]] = m[2]
	}
	return strings.Split(r[0][2], ","), r[0][1], missing
}

// captureFake captures chips from the fake in its default mode (the GH100 list for every chip,
// passes ceil(n/8)) as `metrics chips --capture` does, and unpacks them as cuptitest does.
func captureFake(t *testing.T, lib *cupti.Lib, chips ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, chip := range chips {
		c, err := OpenCatalog(lib, chip)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := c.Capture(curated(t))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteCapture(dir, cc, "test capture of the fake"); err != nil {
			t.Fatal(err)
		}
		gunzipFile(t, filepath.Join(dir, chip+".tsv.gz"), filepath.Join(dir, chip+".tsv"))
	}
	return dir
}

func gunzipFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChipsCaptureRoundTrip: a capture served back by the fake gives the same default set,
// from the captured pass counts alone, and the catalog it was taken from.
func TestChipsCaptureRoundTrip(t *testing.T) {
	lib := openFake(t)
	dir := captureFake(t, lib, "TU102", "GH100")
	for _, chip := range []string{"TU102", "GH100"} {
		set := resolveOn(t, lib, dir, chip)
		want, passes, missing := captured(t, dir, chip)
		if !slices.Equal(set.Metrics(), want) || passes != "1" || set.Passes != 1 {
			t.Errorf("%s: served %q (%d passes), captured %q (%s)", chip, set.Metrics(), set.Passes, want, passes)
		}
		for _, c := range set.Choices {
			if c.Perfworks == "" && missing[c.Name] != string(c.Missing) {
				t.Errorf("%s: %s left out as %s, captured %q", chip, c.Name, c.Missing, missing[c.Name])
			}
		}
		c, err := OpenCatalog(lib, chip)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.List()
		c.Close()
		if err != nil || len(l) != 1279 {
			t.Errorf("%s: served catalog has %d metrics (%v), want the 1,279 captured", chip, len(l), err)
		}
	}
	// A set the capture never measured is not guessed to fit.
	cuptitest.Inject(t, "catalogs="+dir+",chip=GH100")
	before := cuptitest.Query(t, "passes_unknown")
	c, err := OpenCatalog(lib, "GH100")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := c.hc.Passes([]string{"dram__bytes_read.sum", "lts__t_bytes.sum"}); err != nil || n != 2 {
		t.Errorf("unmeasured set: %d passes (%v), want 2", n, err)
	}
	if cuptitest.Query(t, "passes_unknown") != before+1 {
		t.Error("an unmeasured set was not counted in passes_unknown")
	}
}

// TestChipsSampleDefaultsPerChip samples the resolved default set on a device of each chip
// (captured from the fake): the plan is the resolved set in one pass, samples arrive, and the
// trigger is SYSCLK on Turing and GA100 (which refuse GPU_TIME) and GPU_TIME elsewhere.
func TestChipsSampleDefaultsPerChip(t *testing.T) {
	lib := openFake(t)
	chips := []string{"TU102", "TU104", "TU106", "TU116", "TU117", "GA100", "GA102", "AD102", "GH100", "GB100", "GB202"}
	dir := captureFake(t, lib, chips...)
	for _, chip := range chips {
		t.Run(chip, func(t *testing.T) {
			want, _, _ := captured(t, dir, chip)
			r := runFake(t, "catalogs="+dir+",chip="+chip, WithMetrics())
			if p := r.s.Plan(); len(p.Groups) != 1 || !slices.Equal(p.Groups[0].Metrics, want) {
				t.Fatalf("plan %+v, want the resolved set %q", p.Groups, want)
			}
			eventually(t, "samples", func() bool { return r.c.sum(0, samplesOf) > 5 })
			trigger := cuptitest.Query(t, "setconfig.trigger")
			wantTrigger := uint64(cupti.TriggerGPUTime)
			if ChipFacts(chip).Trigger == "SYSCLK" {
				wantTrigger = uint64(cupti.TriggerSysClock)
			}
			if trigger != wantTrigger {
				t.Errorf("trigger %d, want %d (%s)", trigger, wantTrigger, ChipFacts(chip).Trigger)
			}
			if d := r.s.Devices()[0]; d.Chip != chip {
				t.Errorf("device chip %q, want %s", d.Chip, chip)
			}
		})
	}
}

// equivalents finds, per headline metric, the base metrics of a catalog that measure the same
// quantity under any counter-domain prefix: if a chip's catalog has one but the metric resolves
// to nothing "not in the catalog", a candidate is missing from mapping/curated.go.
var equivalents = map[string]*regexp.Regexp{
	"cupti_graphics_engine_active_ratio":       regexp.MustCompile(`^(.*\.)?gr__cycles_active$`),
	"cupti_sm_active_ratio":                    regexp.MustCompile(`^(.*\.)?sm__cycles_active$`),
	"cupti_sm_occupancy_ratio":                 regexp.MustCompile(`^(.*\.)?(sm|tpc)__warps_active(_realtime)?$`),
	"cupti_tensor_pipe_active_ratio":           regexp.MustCompile(`^(.*\.)?sm__pipe_tensor_cycles_active(_realtime)?$`),
	"cupti_dram_active_ratio":                  regexp.MustCompile(`^(.*\.)?dram__cycles_active$`),
	"cupti_fp64_pipe_active_ratio":             regexp.MustCompile(`^(.*\.)?sm__pipe_fp64_cycles_active(_realtime)?$`),
	"cupti_fp32_pipe_active_ratio":             regexp.MustCompile(`^(.*\.)?sm__pipe_fma_cycles_active(_realtime)?$`),
	`cupti_pcie_bytes_total{direction="rx"}`:   regexp.MustCompile(`^(.*\.)?pcie__read_bytes$`),
	`cupti_pcie_bytes_total{direction="tx"}`:   regexp.MustCompile(`^(.*\.)?pcie__write_bytes$`),
	"cupti_dram_read_bytes_total":              regexp.MustCompile(`^(.*\.)?dram__bytes_(op_)?read$`),
	"cupti_dram_write_bytes_total":             regexp.MustCompile(`^(.*\.)?dram__bytes_(op_)?write$`),
	`cupti_nvlink_bytes_total{direction="rx"}`: regexp.MustCompile(`^(.*\.)?nvlrx__bytes$`),
	`cupti_nvlink_bytes_total{direction="tx"}`: regexp.MustCompile(`^(.*\.)?nvltx__bytes$`),
}

// pendingGaps are the headline metrics the captures of 2026-11-25 (CUPTI 13.0) show dropped for
// the pass budget: FP32 (sm__pipe_fma_cycles_active) makes a second pass after the metrics before
// it on these chips, whose catalogs offer no candidate yet tried that fits, even with the
// chips' Triage* variants of the metrics before it and the realtime FMA counter (captured in
// run AK, docs/gpu-validation.md, which fixed GB100, GB102 and GB110); an entry that no longer
// applies fails the test.
var pendingGaps = map[string]string{}

func init() {
	for _, chip := range strings.Fields("AD102 AD103 AD104 AD106 AD107 GA102 GA103 GA104 GA106 GA107 GA10B GB10B TU116 TU117") {
		pendingGaps[chip] = "cupti_fp32_pipe_active_ratio"
	}
}

// TestChipsCapturedDefaultSets proves the resolution on every chip captured from a real CUPTI
// (testdata/chips, `metrics chips --capture` on the GPU machine), with the fake serving each
// capture: the default set is the one CUPTI resolved, in one pass, from measured pass counts
// only; no headline metric is lost where the chip's catalog has it (left out for the pass
// budget, or absent while an equivalent name is in the catalog); and every candidate maps to
// its curated series with the chip's units.
func TestChipsCapturedDefaultSets(t *testing.T) {
	chips := cuptitest.Chips(t)
	if len(chips) == 0 {
		t.Skip("no captures in testdata/chips")
	}
	lib := openFake(t)
	dir := cuptitest.ChipCatalogs(t)
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, chip := range chips {
		set := resolveOn(t, lib, dir, chip)
		want, passes, _ := captured(t, dir, chip)
		if !slices.Equal(set.Metrics(), want) {
			t.Errorf("%s: resolved %q, CUPTI resolved %q", chip, set.Metrics(), want)
		}
		if set.Passes != 1 || passes != "1" {
			t.Errorf("%s: the default set needs %d passes here, %s with CUPTI; want 1", chip, set.Passes, passes)
		}
		if g, ok := pendingGaps[chip]; ok && !slices.ContainsFunc(set.Choices, func(c DefaultChoice) bool {
			return c.Name == g && c.Missing == MissingPassBudget
		}) {
			t.Errorf("%s: pendingGaps lists %s, which is no longer dropped: remove the entry", chip, g)
		}
		c, err := OpenCatalog(lib, chip)
		if err != nil {
			t.Fatal(err)
		}
		bases := c.p.baseNames()
		for _, ch := range set.Choices {
			switch {
			case !ch.Headline:
			case ch.Missing == MissingPassBudget && pendingGaps[chip] == ch.Name:
				t.Logf("%s: %s still dropped for the pass budget (pendingGaps)", chip, ch.Name)
			case ch.Missing == MissingPassBudget:
				t.Errorf("%s: headline metric %s dropped for the pass budget", chip, ch.Name)
			case ch.Missing == MissingFromCatalog:
				if i := slices.IndexFunc(bases, equivalents[ch.Name].MatchString); i >= 0 {
					t.Errorf("%s: %s resolves to nothing, but the catalog has %s: add a candidate", chip, ch.Name, bases[i])
				}
			}
			if ch.Perfworks == "" {
				continue
			}
			p, err := c.hc.Properties(ch.Perfworks)
			if err != nil {
				t.Fatal(err)
			}
			met, err := m.Map(ch.Perfworks, p)
			if err != nil {
				t.Errorf("%s: %s: %v", chip, ch.Perfworks, err)
			} else if got := seriesLabel(mapping.CuratedMetric{Name: met.Desc.Name, Labels: met.Labels}); got != ch.Name {
				t.Errorf("%s: %s maps to %s, want %s", chip, ch.Perfworks, got, ch.Name)
			}
		}
		c.Close()
	}
}

// TestChipsMixedHost samples a host with a GH100 and a chip whose catalog lacks the
// TriageCompute names: each device samples its own chip's names, and both serve the same
// curated series (one family, told apart by the device labels).
func TestChipsMixedHost(t *testing.T) {
	lib := openFake(t)
	reduced := filepath.Join(t.TempDir(), "no-triage.tsv")
	full, err := os.ReadFile(cuptitest.CatalogPath())
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(full), "\n") {
		if !strings.Contains(l, "TriageCompute.") {
			keep = append(keep, l)
		}
	}
	if err := os.WriteFile(reduced, []byte(strings.Join(keep, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := captureFake(t, lib, "GH100")
	t.Setenv("CUPTI_FAKE_CATALOG", reduced) // the default catalog the fake serves from now on
	other := captureFake(t, lib, "GA102")
	for _, f := range []string{"GA102.tsv", "GA102.passes"} {
		b, err := os.ReadFile(filepath.Join(other, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runFake(t, "catalogs="+dir+",chip=GH100/GA102", WithMetrics())
	devs := r.s.Devices()
	if len(devs) != 2 || devs[0].Chip != "GH100" || devs[1].Chip != "GA102" {
		t.Fatalf("devices %+v, want a GH100 and a GA102", devs)
	}
	names := map[string]bool{}
	for _, e := range r.s.Catalog() {
		names[e.Name] = true
	}
	if !names["TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"] || !names["sm__cycles_active.avg.pct_of_peak_sustained_elapsed"] {
		t.Fatalf("catalog %v: want both chips' SM active names", names)
	}
	eventually(t, "cupti_sm_active_ratio on both GPUs", func() bool {
		snap := r.agg.Snapshot()
		_, ok0 := valueOf(snap, devs[0], "cupti_sm_active_ratio")
		_, ok1 := valueOf(snap, devs[1], "cupti_sm_active_ratio")
		return ok0 && ok1
	})
}
