package mapping

// CuratedMetric is one DCGM-comparable metric of the curated table.
type CuratedMetric struct {
	Name      string  // Prometheus name of the main series, e.g. cupti_sm_active_ratio
	Labels    []Label // constant labels, e.g. direction=rx
	Perfworks string  // full Perfworks name to collect, e.g. TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed
}

// The curated table, in priority order: pmsample collects these by default and packs them
// greedily into its one pass, so the first ones win when they do not all fit.
//
// Choices, measured on an H200 (GH100, CUDA 13.0) with cuptiProfilerHostGetNumOfPasses:
// the TriageCompute variants are used where the plain metric costs more (plain
// sm__pipe_fp64_cycles_active needs 2 passes alone; the TriageCompute realtime one needs 1).
// The first nine together need one pass, so the DRAM byte counters (which the attribution
// join uses to tell who moved the bytes) and the FP16 metric come after them: the planner
// adds them only while the pass count stays one. They keep their derived names (a direction
// label on cupti_dram_bytes_total would collide with the derived name of dram__bytes.sum). NVLink byte counters are rejected on a GPU without NVLink, so they come last.
// Occupancy uses tpc__warps_active_realtime: pct_of_peak_sustained_elapsed of active warps
// is resident warps over the maximum, the same figure per TPC as per SM.
const (
	pct      = ".avg.pct_of_peak_sustained_elapsed"
	pcieHelp = "Bytes transferred over PCIe by direction: rx from pcie__read_bytes, tx from pcie__write_bytes (DCGM PCIE_RX_BYTES, PCIE_TX_BYTES)."
	nvlHelp  = "Bytes transferred over NVLink by direction: rx from nvlrx__bytes, tx from nvltx__bytes (DCGM NVLINK_RX_BYTES, NVLINK_TX_BYTES)."
)

// OpenTelemetry names: the hardware semantic conventions where they define the quantity
// (hw.gpu.utilization for the engine's busy time, with hw.gpu.task="general"; hw.gpu.io for
// bytes in and out, PCIe and NVLink told apart by cupti.link), the vendor namespace cupti.
// for the rest.
var (
	pcieAttrs   = []Label{{"cupti.link", "pcie"}}
	nvlinkAttrs = []Label{{"cupti.link", "nvlink"}}
)

var curatedRules = []Rule{
	{
		Match: "FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
		Name:  "cupti_graphics_engine_active_ratio", OTelName: "hw.gpu.utilization", otelAttributes: []Label{{"hw.gpu.task", "general"}},
		Help: "Ratio of time the graphics/compute engine was active (DCGM GR_ENGINE_ACTIVE).",
	},
	{
		Match: "TPC.TriageCompute.sm__cycles_active" + pct,
		Name:  "cupti_sm_active_ratio", OTelName: "cupti.sm.active",
		Help: "Ratio of cycles an SM had at least one warp resident, averaged over all SMs (DCGM SM_ACTIVE).",
	},
	{
		Match: "TPC.TriageCompute.tpc__warps_active_realtime" + pct,
		Name:  "cupti_sm_occupancy_ratio", OTelName: "cupti.sm.occupancy",
		Help: "Ratio of resident warps to the maximum resident warps, averaged over all SMs and elapsed cycles (DCGM SM_OCCUPANCY).",
	},
	{
		Match: "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime" + pct,
		Name:  "cupti_tensor_pipe_active_ratio", OTelName: "cupti.tensor_pipe.active",
		Help: "Ratio of cycles the tensor pipes were active, averaged over all SMs (DCGM PIPE_TENSOR_ACTIVE).",
	},
	{
		Match: "dram__cycles_active" + pct,
		Name:  "cupti_dram_active_ratio", OTelName: "cupti.dram.active",
		Help: "Ratio of cycles the device memory interface was active sending or receiving data (DCGM DRAM_ACTIVE).",
	},
	{
		Match: "TPC.TriageCompute.sm__pipe_fp64_cycles_active_realtime" + pct,
		Name:  "cupti_fp64_pipe_active_ratio", OTelName: "cupti.fp64_pipe.active",
		Help: "Ratio of cycles the FP64 pipe was active, averaged over all SMs (DCGM PIPE_FP64_ACTIVE).",
	},
	{
		Match: "sm__pipe_fma_cycles_active" + pct,
		Name:  "cupti_fp32_pipe_active_ratio", OTelName: "cupti.fp32_pipe.active",
		Help: "Ratio of cycles the FMA pipe (FP32 multiply-add) was active, averaged over all SMs (DCGM PIPE_FP32_ACTIVE).",
	},
	{
		Match: "PCI.TriageCompute.pcie__read_bytes.sum",
		Name:  "cupti_pcie_bytes_total", OTelName: "hw.gpu.io", otelAttributes: pcieAttrs, Labels: map[string]string{"direction": "rx"},
		Help: pcieHelp,
	},
	{
		Match: "PCI.TriageCompute.pcie__write_bytes.sum",
		Name:  "cupti_pcie_bytes_total", OTelName: "hw.gpu.io", otelAttributes: pcieAttrs, Labels: map[string]string{"direction": "tx"},
		Help: pcieHelp,
	},
	{
		Match: "dram__bytes_read.sum",
		Name:  "cupti_dram_read_bytes_total", OTelName: "cupti.dram.bytes_read",
		Help: "Bytes read from device memory (dram__bytes_read).",
	},
	{
		Match: "dram__bytes_write.sum",
		Name:  "cupti_dram_write_bytes_total", OTelName: "cupti.dram.bytes_written",
		Help: "Bytes written to device memory (dram__bytes_write).",
	},
	{
		Match: "sm__inst_executed_pipe_fma_type_fp16" + pct,
		Name:  "cupti_fp16_pipe_active_ratio", OTelName: "cupti.fp16_pipe.active",
		Help: "Ratio of the peak rate of FP16 instructions on the FMA pipe reached, averaged over all SMs (compare DCGM PIPE_FP16_ACTIVE).",
	},
	{
		Match: "nvlrx__bytes.sum",
		Name:  "cupti_nvlink_bytes_total", OTelName: "hw.gpu.io", otelAttributes: nvlinkAttrs, Labels: map[string]string{"direction": "rx"},
		Help: nvlHelp,
	},
	{
		Match: "nvltx__bytes.sum",
		Name:  "cupti_nvlink_bytes_total", OTelName: "hw.gpu.io", otelAttributes: nvlinkAttrs, Labels: map[string]string{"direction": "tx"},
		Help: nvlHelp,
	},
}

// curatedList returns the curated table as CuratedMetric values, in priority order.
func curatedList() []CuratedMetric {
	out := make([]CuratedMetric, 0, len(curatedRules))
	for i := range curatedRules {
		r := &curatedRules[i]
		out = append(out, CuratedMetric{
			Name:      r.Name,
			Labels:    r.labelList(func(s string) string { return s }),
			Perfworks: r.Match,
		})
	}
	return out
}
