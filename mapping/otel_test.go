package mapping

import (
	"slices"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// TestCuratedOTelNames: the curated metrics use the hardware semantic conventions where they
// define the quantity, the cupti. namespace otherwise, and never the generic gpu.*.
func TestCuratedOTelNames(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	pct := pmdata.Properties{Type: pmdata.TypeThroughput, HWUnit: "gr", DimUnit: "percent"}
	util, err := m.Map("FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed", pct)
	if err != nil {
		t.Fatal(err)
	}
	// Not hw.gpu.utilization: that is NVML's (health), one point per GPU and task.
	if util.Desc.OTelName != "cupti.graphics_engine.active" || util.Desc.OTelUnit != "1" || len(util.Desc.OTelAttributes) != 0 {
		t.Errorf("graphics engine active: %s %q %v, want cupti.graphics_engine.active \"1\" without attributes", util.Desc.OTelName, util.Desc.OTelUnit, util.Desc.OTelAttributes)
	}
	if util.Max.OTelName != "cupti.graphics_engine.active.max" || util.Min.OTelName != "cupti.graphics_engine.active.min" {
		t.Errorf("window statistics %s, %s: want cupti.graphics_engine.active.max/.min", util.Max.OTelName, util.Min.OTelName)
	}
	bytes := pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"}
	rx, err := m.Map("PCI.TriageCompute.pcie__read_bytes.sum", bytes)
	if err != nil {
		t.Fatal(err)
	}
	nvl, err := m.Map("nvlrx__bytes.sum", pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "nvlrx", DimUnit: "byte"})
	if err != nil {
		t.Fatal(err)
	}
	if rx.Desc.OTelName != "hw.gpu.io" || nvl.Desc.OTelName != "hw.gpu.io" || rx.Desc.OTelUnit != "By" ||
		slices.Equal(rx.Desc.OTelAttributes, nvl.Desc.OTelAttributes) {
		t.Errorf("PCIe %s %v and NVLink %s %v: want both hw.gpu.io in By, told apart by attributes",
			rx.Desc.OTelName, rx.Desc.OTelAttributes, nvl.Desc.OTelName, nvl.Desc.OTelAttributes)
	}
	for _, r := range curatedTable {
		if r.OTelName == "" || (r.OTelName[:3] != "hw." && r.OTelName[:6] != "cupti.") {
			t.Errorf("curated %s: OTel name %q is neither hw. nor cupti.", r.Name, r.OTelName)
		}
	}
}
