//go:build cgo

package pmsample

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
)

// TestChipsSampleDefaultsPerChip samples the resolved default set on a device of each chip
// (captured from the fake): the plan is the resolved set in one pass, samples arrive, and the
// trigger is SYSCLK on Turing and GA100 (which refuse GPU_TIME) and GPU_TIME elsewhere.
func TestChipsSampleDefaultsPerChip(t *testing.T) {
	lib := pmtest.OpenFake(t)
	chips := []string{"TU102", "TU104", "TU106", "TU116", "TU117", "GA100", "GA102", "AD102", "GH100", "GB100", "GB202"}
	dir := pmtest.CaptureFake(t, lib, chips...)
	for _, chip := range chips {
		t.Run(chip, func(t *testing.T) {
			want, _, _ := pmtest.Captured(t, dir, chip)
			r := runFake(t, "catalogs="+dir+",chip="+chip, WithMetrics())
			if p := r.s.Plan(); len(p.Groups) != 1 || !slices.Equal(p.Groups[0].Metrics, want) {
				t.Fatalf("plan %+v, want the resolved set %q", p.Groups, want)
			}
			eventually(t, "samples", func() bool { return r.c.sum(0, samplesOf) > 5 })
			trigger := cuptitest.Query(t, "setconfig.trigger")
			wantTrigger := uint64(cupti.TriggerGPUTime)
			if catalog.ChipFacts(chip).Trigger == "SYSCLK" {
				wantTrigger = uint64(cupti.TriggerSysClock)
			}
			if trigger != wantTrigger {
				t.Errorf("trigger %d, want %d (%s)", trigger, wantTrigger, catalog.ChipFacts(chip).Trigger)
			}
			if d := r.s.Devices()[0]; d.Chip != chip {
				t.Errorf("device chip %q, want %s", d.Chip, chip)
			}
		})
	}
}

// TestChipsMixedHost samples a host with a GH100 and a chip whose catalog lacks the
// TriageCompute names: each device samples its own chip's names, and both serve the same
// curated series (one family, told apart by the device labels).
func TestChipsMixedHost(t *testing.T) {
	lib := pmtest.OpenFake(t)
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
	dir := pmtest.CaptureFake(t, lib, "GH100")
	t.Setenv("CUPTI_FAKE_CATALOG", reduced) // the default catalog the fake serves from now on
	other := pmtest.CaptureFake(t, lib, "GA102")
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
		_, ok0 := pmtest.ValueOf(snap, devs[0], "cupti_sm_active_ratio")
		_, ok1 := pmtest.ValueOf(snap, devs[1], "cupti_sm_active_ratio")
		return ok0 && ok1
	})
}
