package gpmsource

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// metric is a curated family that GPM serves and the GPM metrics it is read from (their sum).
// NVML computes a GPM metric between two samples; ratios come as percentages (0-100), link
// traffic as MiB/s, which is summed into bytes over each pair's span for the byte counters.
type metric struct {
	family    string // curated family (mapping.CuratedMetric.Name)
	direction string // the family's direction label, for the byte counters
	ids       []nvml.GpmMetricId
	mibps     bool // MiB/s: a byte counter
	nvlink    bool // served only on a GPU with an NVLink link up (PM sampling leaves it out otherwise)
}

// maxLinkRate bounds the traffic a sample may show, bytes a second per direction: above the
// fastest link any GPU has (NVLink 5: 900 GB/s a direction; PCIe 6 x16: 128 GB/s).
const maxLinkRate = 2e12

// metrics are the curated families GPM serves, each with the GPM metrics that read what PM
// sampling's metric reads: side by side on an H100 (docs/gpu-validation.md run BR) graphics,
// SM and tensor activity, DRAM, FP64 and PCIe agreed within half a point (1.5 % for PCIe
// bytes). PM sampling's FMA pipe (cupti_fp32_pipe_active_ratio) runs FP16 as well as FP32
// multiply-adds, which GPM splits: their sum is served. Left out: SM occupancy (GPM's
// SM_OCCUPANCY read 0.5 to 4.4 times PM sampling's tpc__warps_active_realtime on the same
// workloads: another quantity under the same name) and the FP16 pipe (PM sampling's default
// set leaves it out on Hopper, so nothing checked GPM's against it).
var metrics = []metric{
	{family: "cupti_graphics_engine_active_ratio", ids: ids(nvml.GPM_METRIC_GRAPHICS_UTIL)},
	{family: "cupti_sm_active_ratio", ids: ids(nvml.GPM_METRIC_SM_UTIL)},
	{family: "cupti_tensor_pipe_active_ratio", ids: ids(nvml.GPM_METRIC_ANY_TENSOR_UTIL)},
	{family: "cupti_dram_active_ratio", ids: ids(nvml.GPM_METRIC_DRAM_BW_UTIL)},
	{family: "cupti_fp64_pipe_active_ratio", ids: ids(nvml.GPM_METRIC_FP64_UTIL)},
	{family: "cupti_fp32_pipe_active_ratio", ids: ids(nvml.GPM_METRIC_FP32_UTIL, nvml.GPM_METRIC_FP16_UTIL)},
	{family: "cupti_pcie_bytes_total", direction: "rx", ids: ids(nvml.GPM_METRIC_PCIE_RX_PER_SEC), mibps: true},
	{family: "cupti_pcie_bytes_total", direction: "tx", ids: ids(nvml.GPM_METRIC_PCIE_TX_PER_SEC), mibps: true},
	{family: "cupti_nvlink_bytes_total", direction: "rx", ids: ids(nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC), mibps: true, nvlink: true},
	{family: "cupti_nvlink_bytes_total", direction: "tx", ids: ids(nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC), mibps: true, nvlink: true},
}

func ids(id ...nvml.GpmMetricId) []nvml.GpmMetricId { return id }

// mib is the size of the unit of GPM's link rates.
const mib = 1 << 20

// resolved is a metric with the curated Perfworks name (GH100's) its samples are aggregated
// under, so that the aggregator maps it to the curated family's own Desc.
type resolved struct {
	metric
	perfworks string
	props     pmdata.Properties
}

// Families returns the curated families GPM can serve, in the table's order.
func Families() []string {
	var out []string
	for _, x := range metrics {
		if !slices.Contains(out, x.family) {
			out = append(out, x.family)
		}
	}
	return out
}

// unknownFamily says why a family name is not one GPM serves (nil when it is): the check of
// gpm.families (Config.Validate) and of WithFamilies (New).
func unknownFamily(name string) error {
	if all := Families(); !slices.Contains(all, name) {
		return fmt.Errorf("%q is not a family GPM serves (%s)", name, strings.Join(all, ", "))
	}
	return nil
}

// resolve finds each metric's curated Perfworks name in the mapper's table, for the families
// wanted (nil: every one); a wanted family GPM does not serve is an error.
func resolve(m *mapping.Mapper, wanted []string) ([]resolved, error) {
	for _, f := range wanted {
		if err := unknownFamily(f); err != nil {
			return nil, fmt.Errorf("gpm: families: %w", err)
		}
	}
	var out []resolved
	for _, x := range metrics {
		if len(wanted) > 0 && !slices.Contains(wanted, x.family) {
			continue
		}
		found := false
		for _, c := range m.Curated() {
			if c.Name != x.family || labelValue(c.Labels, "direction") != x.direction {
				continue
			}
			p := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "cycle"} // pct_of_peak_sustained_elapsed: a ratio
			if x.mibps {
				p.DimUnit = "byte"
			}
			out = append(out, resolved{metric: x, perfworks: c.Perfworks, props: p})
			found = true
			break
		}
		if !found {
			return nil, fmt.Errorf("gpm: curated metric %s{direction=%q} not in the curated table", x.family, x.direction)
		}
	}
	return out, nil
}

func labelValue(ls []snapshot.Label, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// catalog is what the aggregator knows of the metrics: their Perfworks names and properties.
func catalog(ms []resolved) []pmdata.CatalogEntry {
	out := make([]pmdata.CatalogEntry, len(ms))
	for i, m := range ms {
		out[i] = pmdata.CatalogEntry{Name: m.perfworks, Properties: m.props}
	}
	return out
}

// value turns GPM's reading of m over a pair of span seconds (the sum of its metrics' values)
// into the value a PM sample of the curated metric holds (percent; bytes), or reports that it
// cannot be one: NaN (NVML answered NaN for DRAM_BW_UTIL in 3 of 120 pairs under a matmul on an
// H100), negative, or above what the hardware can produce (a ratio more than a point above
// 100 %; a link faster than maxLinkRate). Up to a point above 100 % is rounding and is clamped,
// as PM sampling's guard does.
func (m metric) value(v, span float64) (float64, bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
		return 0, false
	case m.mibps:
		if v*mib > maxLinkRate {
			return 0, false
		}
		return v * mib * span, true
	case v > 101:
		return 0, false
	}
	return math.Min(v, 100), true
}
