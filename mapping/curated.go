package mapping

import (
	"strings"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// CuratedMetric is one DCGM-comparable metric of the curated table: one Prometheus name,
// help, OTel name and labels on every chip, collected from the first of its candidate
// Perfworks names that the chip's catalog offers and that fits the one pass.
type CuratedMetric struct {
	Name       string           // Prometheus name of the main series, e.g. cupti_sm_active_ratio
	Labels     []snapshot.Label // constant labels, e.g. direction=rx
	Perfworks  string           // the first candidate: the name collected on GH100 (H100, H200), where it was measured
	Candidates []Candidate      // every Perfworks name it may be collected from, in the order they are tried
	Headline   bool             // the default set must keep it on every chip whose catalog has it
}

// Candidate is one Perfworks name a curated metric may be collected from.
type Candidate struct {
	Perfworks string   // full name, e.g. sm__cycles_active.avg.pct_of_peak_sustained_elapsed
	Chips     []string // chip name prefixes it is tried on (e.g. "GA10", "AD"); empty: every chip
}

// For lists the candidates tried on chip, in order.
func (c CuratedMetric) For(chip string) []string {
	var out []string
	for _, k := range c.Candidates {
		if k.on(chip) {
			out = append(out, k.Perfworks)
		}
	}
	return out
}

func (k Candidate) on(chip string) bool {
	if len(k.Chips) == 0 {
		return true
	}
	for _, p := range k.Chips {
		if strings.HasPrefix(chip, p) {
			return true
		}
	}
	return false
}

// The curated table, in priority order: pmsample resolves it per chip (each metric takes the
// first of its candidates that the chip's catalog has and that keeps the pass count at one
// with the metrics before it), so the first ones win when they do not all fit.
//
// The first candidate of each metric is the GH100 name, measured on an H200 (CUDA 13.0) with
// cuptiProfilerHostGetNumOfPasses: the TriageCompute variants are used where the plain metric
// costs more (plain sm__pipe_fp64_cycles_active needs 2 passes alone; the TriageCompute
// realtime one needs 1). The first nine together need one pass, then come the DRAM byte
// counters (which the attribution join uses to tell who moved the bytes) and the NVLink byte
// counters (rejected on a GPU without NVLink); FP16 is the least important of the DCGM ones (on
// GH100 it needs a second pass); the context-switch cycles, last, let the attribution join
// tell whose turn a sample was when processes time-slice. The DRAM byte counters keep their
// derived names (a
// direction label on cupti_dram_bytes_total would collide with the derived name of
// dram__bytes.sum). Occupancy uses tpc__warps_active_realtime where the chip has it:
// pct_of_peak_sustained_elapsed of active warps is resident warps over the maximum, the same
// figure per TPC as per SM. The other candidates are the same quantities under the names
// other chips' catalogs give them (docs/supported-gpus.md lists what each chip resolves to).
const (
	pct      = ".avg.pct_of_peak_sustained_elapsed"
	pcieHelp = "Bytes transferred over PCIe by direction: rx from pcie__read_bytes, tx from pcie__write_bytes (DCGM PCIE_RX_BYTES, PCIE_TX_BYTES)."
	nvlHelp  = "Bytes transferred over NVLink by direction, payload and protocol (packet headers) together, as DCGM counts them: rx from nvlrx__bytes, tx from nvltx__bytes (DCGM NVLINK_RX_BYTES, NVLINK_TX_BYTES)."
)

// OpenTelemetry names: the hardware semantic conventions where they define the quantity
// (hw.gpu.io for bytes in and out, PCIe and NVLink told apart by cupti.link), the vendor
// namespace cupti. for the rest. The engine's busy time is cupti.graphics_engine.active, not
// hw.gpu.utilization: that instrument is NVML's (health), which gives the general, encoder
// and decoder tasks the conventions name from one sampling and also while PM sampling is
// paused or released; one point per task and GPU (docs/otlp.md).
var (
	pcieAttrs   = []snapshot.Label{{Name: "cupti.link", Value: "pcie"}}
	nvlinkAttrs = []snapshot.Label{{Name: "cupti.link", Value: "nvlink"}}
)

// curatedEntry is a curated metric: its rule (Match is the GH100 name, tried first on every
// chip) and the further candidates, tried in order.
type curatedEntry struct {
	Rule
	more     []Candidate
	optional bool // not a headline metric: the first one the pass budget drops
}

// anyChip makes candidates tried on every chip.
func anyChip(names ...string) []Candidate {
	out := make([]Candidate, len(names))
	for i, n := range names {
		out[i] = Candidate{Perfworks: n}
	}
	return out
}

var curatedTable = []curatedEntry{
	{Rule: Rule{
		Match: "FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
		Name:  "cupti_graphics_engine_active_ratio", OTelName: "cupti.graphics_engine.active",
		Help: "Ratio of time the graphics/compute engine was active (DCGM GR_ENGINE_ACTIVE).",
	}, more: anyChip(
		"FE_B.TriageAC.gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
		"FE_A.TriageAC.gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
		"FE_A.TriageA.gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
		"gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
	)},
	{Rule: Rule{
		Match: "TPC.TriageCompute.sm__cycles_active" + pct,
		Name:  "cupti_sm_active_ratio", OTelName: "cupti.sm.active",
		Help: "Ratio of cycles an SM had at least one warp resident, averaged over all SMs (DCGM SM_ACTIVE).",
	}, more: anyChip(
		"SM_A.TriageAC.sm__cycles_active"+pct,
		"SM.TriageA.sm__cycles_active"+pct,
		"sm__cycles_active"+pct,
	)},
	{Rule: Rule{
		Match: "TPC.TriageCompute.tpc__warps_active_realtime" + pct,
		Name:  "cupti_sm_occupancy_ratio", OTelName: "cupti.sm.occupancy",
		Help: "Ratio of resident warps to the maximum resident warps, averaged over all SMs and elapsed cycles (DCGM SM_OCCUPANCY).",
	}, more: anyChip(
		"TriageAC.tpc__warps_active_realtime"+pct,
		"TPC.TriageA.tpc__warps_active_realtime"+pct,
		"tpc__warps_active_realtime"+pct,
		"SM_A.TriageAC.sm__warps_active"+pct,
		"sm__warps_active_realtime"+pct,
		"sm__warps_active"+pct,
	)},
	{Rule: Rule{
		Match: "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime" + pct,
		Name:  "cupti_tensor_pipe_active_ratio", OTelName: "cupti.tensor_pipe.active",
		Help: "Ratio of cycles the tensor pipes were active, averaged over all SMs (DCGM PIPE_TENSOR_ACTIVE).",
	}, more: anyChip(
		"sm__pipe_tensor_cycles_active_realtime"+pct,
		"SM_A.TriageAC.sm__pipe_tensor_cycles_active"+pct,
		"sm__pipe_tensor_cycles_active"+pct,
	)},
	{Rule: Rule{
		Match: "dram__cycles_active" + pct,
		Name:  "cupti_dram_active_ratio", OTelName: "cupti.dram.active",
		Help: "Ratio of cycles the device memory interface was active sending or receiving data (DCGM DRAM_ACTIVE).",
	}},
	{Rule: Rule{
		Match: "TPC.TriageCompute.sm__pipe_fp64_cycles_active_realtime" + pct,
		Name:  "cupti_fp64_pipe_active_ratio", OTelName: "cupti.fp64_pipe.active",
		Help: "Ratio of cycles the FP64 pipe was active, averaged over all SMs (DCGM PIPE_FP64_ACTIVE).",
	}, more: anyChip(
		"sm__pipe_fp64_cycles_active_realtime"+pct,
		"SM_A.TriageAC.sm__pipe_fp64_cycles_active"+pct,
		"sm__pipe_fp64_cycles_active"+pct,
	)},
	{Rule: Rule{
		Match: "sm__pipe_fma_cycles_active" + pct,
		Name:  "cupti_fp32_pipe_active_ratio", OTelName: "cupti.fp32_pipe.active",
		Help: "Ratio of cycles the FMA pipe (FP32 multiply-add) was active, averaged over all SMs (DCGM PIPE_FP32_ACTIVE).",
	}, more: anyChip(
		"TPC.TriageCompute.sm__pipe_fma_cycles_active_realtime"+pct,
		"SM_A.TriageAC.sm__pipe_fma_cycles_active"+pct,
		"sm__pipe_fma_cycles_active_realtime"+pct,
	)},
	{Rule: Rule{
		Match: "PCI.TriageCompute.pcie__read_bytes.sum",
		Name:  "cupti_pcie_bytes_total", OTelName: "hw.gpu.io", otelAttributes: pcieAttrs, Labels: map[string]string{"direction": "rx"},
		Help: pcieHelp,
	}, more: anyChip("PCI.TriageAC.pcie__read_bytes.sum", "PCI.TriageA.pcie__read_bytes.sum", "pcie__read_bytes.sum")},
	{Rule: Rule{
		Match: "PCI.TriageCompute.pcie__write_bytes.sum",
		Name:  "cupti_pcie_bytes_total", OTelName: "hw.gpu.io", otelAttributes: pcieAttrs, Labels: map[string]string{"direction": "tx"},
		Help: pcieHelp,
	}, more: anyChip("PCI.TriageAC.pcie__write_bytes.sum", "PCI.TriageA.pcie__write_bytes.sum", "pcie__write_bytes.sum")},
	{Rule: Rule{
		Match: "dram__bytes_read.sum",
		Name:  "cupti_dram_read_bytes_total", OTelName: "cupti.dram.bytes_read",
		Help: "Bytes read from device memory (dram__bytes_read, dram__bytes_op_read on chips that name it so).",
	}, more: anyChip("dram__bytes_op_read.sum")},
	{Rule: Rule{
		Match: "dram__bytes_write.sum",
		Name:  "cupti_dram_write_bytes_total", OTelName: "cupti.dram.bytes_written",
		Help: "Bytes written to device memory (dram__bytes_write, dram__bytes_op_write on chips that name it so).",
	}, more: anyChip("dram__bytes_op_write.sum")},
	{Rule: Rule{
		Match: "nvlrx__bytes.sum",
		Name:  "cupti_nvlink_bytes_total", OTelName: "hw.gpu.io", otelAttributes: nvlinkAttrs, Labels: map[string]string{"direction": "rx"},
		Help: nvlHelp,
	}},
	{Rule: Rule{
		Match: "nvltx__bytes.sum",
		Name:  "cupti_nvlink_bytes_total", OTelName: "hw.gpu.io", otelAttributes: nvlinkAttrs, Labels: map[string]string{"direction": "tx"},
		Help: nvlHelp,
	}},
	{Rule: Rule{
		Match: "sm__inst_executed_pipe_fma_type_fp16" + pct,
		Name:  "cupti_fp16_pipe_active_ratio", OTelName: "cupti.fp16_pipe.active",
		Help: "Ratio of the peak rate of FP16 instructions on the FMA pipe reached, averaged over all SMs (compare DCGM PIPE_FP16_ACTIVE).",
	}, optional: true},
	{Rule: Rule{
		Match: "FE_A.TriageCompute.gpu__gr_cycles_active_cmd_ctxsw.sum",
		Name:  "cupti_gpu_context_switch_cycles_total", OTelName: "cupti.gpu.context_switch.cycles",
		Help: "Cycles the GPU's front end spent on context-switch commands: time-slicing between processes (about 250,000 a switch on an H100). The attribution join tells from it whose turn each sample was (docs/attribution.md).",
	}, more: anyChip("gpu__gr_cycles_active_cmd_ctxsw.sum"), optional: true},
}

// candidates lists every Perfworks name of e, the GH100 name first.
func (e *curatedEntry) candidates() []Candidate {
	return append([]Candidate{{Perfworks: e.Match}}, e.more...)
}

// curatedList returns the curated table as CuratedMetric values, in priority order.
func curatedList() []CuratedMetric {
	out := make([]CuratedMetric, 0, len(curatedTable))
	for i := range curatedTable {
		e := &curatedTable[i]
		out = append(out, CuratedMetric{
			Name:       e.Name,
			Labels:     e.labelList(func(s string) string { return s }),
			Perfworks:  e.Match,
			Candidates: e.candidates(),
			Headline:   !e.optional,
		})
	}
	return out
}
