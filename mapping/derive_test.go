package mapping

import (
	"slices"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestDerivedNames pins the derived naming on representative GH100 metrics
// (docs/metric-naming.md explains each rule).
func TestDerivedNames(t *testing.T) {
	tests := []struct {
		full, name, unit, ucum string
		kind                   snapshot.Kind
		scale                  float64
	}{
		// The unit word moves to the end; sum is the default rollup and is not named.
		{"dram__bytes_read.sum", "cupti_dram_read_bytes_total", "bytes", "By", snapshot.KindCounter, 1},
		{"dram__bytes_read.sum.per_second", "cupti_dram_read_bytes_per_second", "bytes_per_second", "By/s", snapshot.KindGauge, 1},
		// Other rollups are named unit_<rollup> after the hardware unit.
		{"gr__cycles_elapsed.max", "cupti_gr_unit_max_elapsed_cycles_total", "cycles", "{cycle}", snapshot.KindCounter, 1},
		{"dram__bytes.min.per_second", "cupti_dram_unit_min_bytes_per_second", "bytes_per_second", "By/s", snapshot.KindGauge, 1},
		// Percentages of peak become ratios; the quantity stays whole.
		{"sm__warps_active.avg.pct_of_peak_sustained_active", "cupti_sm_unit_avg_warps_active_of_peak_active_ratio", "ratio", "1", snapshot.KindGauge, 0.01},
		{"dram__throughput.avg.pct_of_peak_sustained_elapsed", "cupti_dram_unit_avg_throughput_of_peak_elapsed_ratio", "ratio", "1", snapshot.KindGauge, 0.01},
		// Catalog prefixes become leading words.
		{"FBSP.TriageCompute.dramc__cycles_elapsed.avg.per_second", "cupti_fbsp_triage_compute_dramc_unit_avg_elapsed_cycles_per_second", "cycles_per_second", "{cycle}/s", snapshot.KindGauge, 1},
		{"FE_B.TriageCompute.fe__output_ops.sum", "cupti_feb_triage_compute_fe_output_ops_operations_total", "operations", "{operation}", snapshot.KindCounter, 1},
		// Per-cycle and peak submetrics.
		{"sm__inst_executed.avg.per_cycle_active", "cupti_sm_unit_avg_inst_executed_instructions_per_active_cycle", "instructions_per_active_cycle", "{instruction}/{cycle}", snapshot.KindGauge, 1},
		{"dram__bytes.sum.peak_sustained", "cupti_dram_peak_bytes_per_cycle", "bytes_per_cycle", "By/{cycle}", snapshot.KindGauge, 1},
		{"dram__bytes.sum.peak_sustained_elapsed.per_second", "cupti_dram_peak_elapsed_bytes_per_second", "bytes_per_second", "By/s", snapshot.KindGauge, 1},
		// Products and quotients of dimension units; nanoseconds become seconds.
		{"sm__warps_active.sum", "cupti_sm_warps_active_warp_cycles_total", "warp_cycles", "{warp}.{cycle}", snapshot.KindCounter, 1},
		{"gpu__time_duration.sum", "cupti_gpu_time_duration_seconds_total", "seconds", "s", snapshot.KindCounter, 1e-9},
		// Ratios: .pct is the 0..1 ratio, .ratio keeps the ratio's own unit (none here).
		{"lts__t_sector_hit_rate.pct", "cupti_lts_t_sector_hit_rate_ratio", "ratio", "1", snapshot.KindGauge, 0.01},
		{"lts__t_sector_hit_rate.ratio", "cupti_lts_t_sector_hit_rate", "", "1", snapshot.KindGauge, 1},
		{"smsp__average_inst_executed_per_warp.ratio", "cupti_smsp_average_inst_executed_per_warp_instructions_per_warp", "instructions_per_warp", "{instruction}/{warp}", snapshot.KindGauge, 1},
		{"smsp__average_warps_active_per_issue_active.max_rate", "cupti_smsp_average_warps_active_per_issue_active_max_rate_warps", "warps", "{warp}", snapshot.KindGauge, 1},
		// Words promlint rejects are respelled.
		{"SM_A.TriageCompute.l1tex__m_xbar2l1tex_read_sectors_realtime.sum", "cupti_sma_triage_compute_l1tex_mstage_xbar2l1tex_read_realtime_sectors_total", "sectors", "{sector}", snapshot.KindCounter, 1},
		{"TPC.TriageCompute.tpc__l1tex_mem_shared_data_compute_kilobytes_configured_realtime.sum", "cupti_tpc_triage_compute_tpc_l1tex_mem_shared_data_compute_kilobyte_configured_realtime_kilobyte_cycles_total", "kilobyte_cycles", "kBy.{cycle}", snapshot.KindCounter, 1},
	}
	props := catalogProps(t)
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		met := mapFull(t, m, props, tt.full)
		d := met.Desc
		if d.Name != tt.name || d.Unit != tt.unit || d.OTelUnit != tt.ucum || d.Kind != tt.kind || met.Scale != tt.scale {
			t.Errorf("%s:\n got %s unit %q ucum %q %s scale %g\nwant %s unit %q ucum %q %s scale %g",
				tt.full, d.Name, d.Unit, d.OTelUnit, d.Kind, met.Scale, tt.name, tt.unit, tt.ucum, tt.kind, tt.scale)
		}
		if !slices.Equal(d.LabelNames, snapshot.DeviceLabelNames) || len(met.Labels) != 0 {
			t.Errorf("%s: labels %v %v", tt.full, d.LabelNames, met.Labels)
		}
	}
}

func TestParseDim(t *testing.T) {
	tests := []struct {
		dim, word, ucum, single string
		scale                   float64
	}{
		{"", "", "1", "", 1},
		{"byte", "bytes", "By", "bytes", 1},
		{"sys_cycle", "cycles", "{cycle}", "cycles", 1},
		{"nanosecond", "seconds", "s", "seconds", 1e-9},
		{"percent", "ratio", "1", "ratio", 0.01},
		{"gpc_cyclewarp", "warp_cycles", "{warp}.{cycle}", "", 1},
		{"bytegpc_cycle", "byte_cycles", "By.{cycle}", "", 1},
		{"gpc_cycleinstruction/warp", "instruction_cycles_per_warp", "{instruction}.{cycle}/{warp}", "", 1},
		{"register/thread", "registers_per_thread", "{register}/{thread}", "", 1},
		{"l2_requestl2_sector/gcc_request", "request_sectors_per_request", "{request}.{sector}/{request}", "", 1},
		{"Frobs", "frobs", "{frobs}", "frobs", 1}, // unknown units still give valid words
	}
	for _, tt := range tests {
		u := parseDim(tt.dim)
		if u.word != tt.word || u.ucum != tt.ucum || u.single != tt.single || u.scale != tt.scale {
			t.Errorf("parseDim(%q) = %+v, want word %q ucum %q single %q scale %g", tt.dim, u, tt.word, tt.ucum, tt.single, tt.scale)
		}
	}
}

func TestLintSafe(t *testing.T) {
	for in, want := range map[string]string{
		"m": "mstage", "t": "t", "ms": "msx", "kilobytes": "kilobyte", "bits": "bit", "gauge": "gaugex",
		"bytes": "bytes", "seconds": "seconds", "megabytes": "megabyte", "sectors": "sectors",
	} {
		if got := lintSafe(in); got != want {
			t.Errorf("lintSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// Properties read for a full name carry the submetric's unit ("byte/second" on the H200);
// the rate is named once.
func TestDeriveFullNameUnits(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, dim := range []string{"byte", "byte/second"} {
		got, err := m.Map("dram__bytes_read.sum.per_second", pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "dram", DimUnit: dim})
		if err != nil {
			t.Fatal(err)
		}
		if got.Desc.Name != "cupti_dram_read_bytes_per_second" || got.Desc.OTelUnit != "By/s" {
			t.Errorf("dim %q: %s (%s), want cupti_dram_read_bytes_per_second (By/s)", dim, got.Desc.Name, got.Desc.OTelUnit)
		}
	}
}
