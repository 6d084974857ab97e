package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// This file builds the dashboards. TestGenerated compares the checked-in JSON with
// what it builds; `go test ./dashboards/ -update` rewrites the JSON.

var ds = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// Label matchers shared by the queries of each dashboard.
const (
	nodeSel = `cluster=~"$cluster", instance=~"$instance"`
	gpuSel  = nodeSel + `, uuid=~"$gpu"`
	podSel  = nodeSel + `, namespace=~"$namespace", pod=~"$pod"`
)

// Histograms: the exporter serves kernel and copy durations as native histograms (to a
// Prometheus that negotiates protobuf with native histograms on) and as classic buckets
// (text formats, or a Prometheus without the feature). Prometheus 2.x keeps one kind or
// the other, never both (scrape_classic_histograms arrives in 2.45), so each histogram
// query joins the native form with the classic one: the native side wins where present.

// histCount is the per-second count of a histogram, summed by the given labels.
func histCount(name, sel, by string) string {
	return `sum by (` + by + `) (histogram_count(rate(` + name + `{` + sel + `}[$__rate_interval])))` +
		` or sum by (` + by + `) (rate(` + name + `_count{` + sel + `}[$__rate_interval]))`
}

// histSumIncrease is the increase of a histogram's sum over rng, summed by the given labels.
func histSumIncrease(name, sel, by, rng string) string {
	return `sum by (` + by + `) (histogram_sum(increase(` + name + `{` + sel + `}[` + rng + `])))` +
		` or sum by (` + by + `) (increase(` + name + `_sum{` + sel + `}[` + rng + `]))`
}

// histQuantile is the q quantile of a histogram, by the given labels.
func histQuantile(q, name, sel, by string) string {
	return `histogram_quantile(` + q + `, sum by (` + by + `) (rate(` + name + `{` + sel + `}[$__rate_interval])))` +
		` or histogram_quantile(` + q + `, sum by (le, ` + by + `) (rate(` + name + `_bucket{` + sel + `}[$__rate_interval])))`
}

// histHeatmap is a histogram's rate for a heatmap: the native histogram, or, when there is
// none ("or on()": the classic side only if the native side is empty), the classic buckets.
func histHeatmap(name, sel string) string {
	return `sum(rate(` + name + `{` + sel + `}[$__rate_interval]))` +
		` or on() sum by (le) (rate(` + name + `_bucket{` + sel + `}[$__rate_interval]))`
}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Range()
}

func instantTable(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).Instant().Format(prometheus.PromQueryFormatTable).RefId("A")
}

func legend(placement common.LegendPlacement) *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).
		Placement(placement).Calcs([]string{"mean", "max"})
}

func series(title, desc, unit string, w uint32, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).Unit(unit).
		Span(w).Height(8).FillOpacity(10).LineWidth(1).Legend(legend(common.LegendPlacementBottom))
	if unit == "percentunit" {
		p.Min(0).Max(1)
	}
	for i, q := range queries {
		p.WithTarget(q.RefId(string(rune('A' + i))))
	}
	return p
}

func single(title, desc, unit, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).Unit(unit).Span(6).Height(4).
		GraphMode(common.BigValueGraphModeArea).ColorMode(common.BigValueColorModeValue).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(expr).Instant().RefId("A"))
}

func histogramHeatmap(title, desc, expr string) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().Title(title).Description(desc).Datasource(ds).Span(12).Height(9).
		Calculate(false).Unit("s").
		Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Steps(64).Fill("dark-orange").Reverse(false)).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		CellGap(1).
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(expr).Format(prometheus.PromQueryFormatHeatmap).LegendFormat("{{le}}").Range().RefId("A"))
}

// Variables.

func datasourceVar() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")
}

func labelVar(name, label, def string, multi bool) *dashboard.QueryVariableBuilder {
	v := dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(ds).
		Query(dashboard.StringOrMap{String: cog.ToPtr(def)}).Definition(def).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		IncludeAll(true).AllValue(".*")
	if multi {
		v.Multi(true)
	}
	return v
}

func clusterVar() *dashboard.QueryVariableBuilder {
	return labelVar("cluster", "Cluster", "label_values(cupti_exporter_build_info, cluster)", false)
}

func instanceVar() *dashboard.QueryVariableBuilder {
	return labelVar("instance", "Node", `label_values(cupti_exporter_build_info{cluster=~"$cluster"}, instance)`, true)
}

func newDashboard(uid, title, desc string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).
		Tags([]string{"cupti-exporter", "gpu", "nvidia"}).Editable().Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Time("now-1h", "now").Refresh("30s").Timezone("browser").
		Link(dashboard.NewDashboardLinkBuilder("cupti-exporter").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"cupti-exporter"}).AsDropdown(true).IncludeVars(true).KeepTime(true)).
		WithVariable(datasourceVar()).WithVariable(clusterVar()).WithVariable(instanceVar())
}

// The curated device gauges (mapping's DCGM-comparable names), without the _ratio suffix.
var deviceGauges = []struct{ name, title, desc, noData string }{
	{"cupti_graphics_engine_active", "Graphics engine active", "Fraction of time the graphics/compute engine was busy (DCGM_FI_PROF_GR_ENGINE_ACTIVE).", ""},
	{"cupti_sm_active", "SM active", "Fraction of time at least one warp was resident on an SM, averaged over SMs (DCGM_FI_PROF_SM_ACTIVE).", ""},
	{"cupti_sm_occupancy", "SM occupancy", "Resident warps as a fraction of the maximum, averaged over SMs (DCGM_FI_PROF_SM_OCCUPANCY).", ""},
	{"cupti_tensor_pipe_active", "Tensor pipe active", "Fraction of cycles the tensor (HMMA) pipe was active (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE).", ""},
	{"cupti_fp64_pipe_active", "FP64 pipe active", "Fraction of cycles the FP64 pipe was active (DCGM_FI_PROF_PIPE_FP64_ACTIVE).", ""},
	{"cupti_fp32_pipe_active", "FP32 pipe active", "Fraction of cycles the FP32 pipe was active (DCGM_FI_PROF_PIPE_FP32_ACTIVE).", ""},
	{"cupti_fp16_pipe_active", "FP16 pipe active", "Fraction of cycles the FP16 pipe was active (DCGM_FI_PROF_PIPE_FP16_ACTIVE). Empty by default on H100/H200: with the other curated metrics it needs a second pass, so the exporter leaves it out unless --pmsample.multiplex lets metric groups take turns.", fp16NoData},
	{"cupti_dram_active", "DRAM active", "Fraction of cycles the device memory interface was busy (DCGM_FI_PROF_DRAM_ACTIVE).", ""},
}

// Why some panels are empty on a default H100/H200, shown in place of "No data".
const (
	fp16NoData   = "Not sampled: FP16 needs a second pass on H100/H200 (--pmsample.multiplex)"
	nvlinkNoData = "No NVLink counters: CUPTI offers them only on hosts with NVLink peers"
	nvlinkDesc   = " Empty on a host without NVLink peers (one GPU, or PCIe-only): CUPTI refuses the NVLink counters there and the exporter logs that it left them out."
	liveOnly     = " Reported by a live exporter only (a replayed recording, such as --demo, has no sampler state)."
)

func fleetOverview() *dashboard.DashboardBuilder {
	byGPU := "{{instance}} GPU {{gpu}}"
	d := newDashboard("cupti-fleet", "CUPTI / Fleet overview",
		"GPU activity across nodes from cupti-exporter PM sampling: engine, SM, tensor and DRAM activity, PCIe and NVLink traffic, and GPUs held by pods that do not use them.").
		WithVariable(labelVar("gpu", "GPU", `label_values(cupti_sm_active_ratio{cluster=~"$cluster", instance=~"$instance"}, uuid)`, true))
	d.WithRow(dashboard.NewRowBuilder("Summary"))
	d.WithPanel(single("GPUs sampled", "GPUs whose PM sample count grows: counters are being sampled now (live or replayed).", "short",
		`count(rate(cupti_pm_samples_total{`+gpuSel+`}[$__rate_interval]) > 0) or vector(0)`))
	// An idle-released GPU delivers no samples by design: it is not "not sampled".
	d.WithPanel(single("GPUs not sampled", "GPUs whose PM sample count stands still, or whose sampler reports paused, busy (another profiler holds the counters) or error (cupti_pm_sampling_state, live exporters only). GPUs released because they are idle are not counted here (see GPUs idle-released).", "short",
		`count(count by (instance, uuid) (((rate(cupti_pm_samples_total{`+gpuSel+`}[$__rate_interval]) == 0) or (cupti_pm_sampling_state{`+gpuSel+`, state!~"sampling|idle-released"} == 1)) unless on (instance, uuid) (cupti_pm_sampling_state{`+gpuSel+`, state="idle-released"} == 1))) or vector(0)`))
	d.WithPanel(single("GPUs idle-released", "GPUs whose PM session the exporter released because they were idle (--pmsample.idle-release-after): no samples and no PM power cost until work starts. Not a fault (live exporters only).", "short",
		`count(cupti_pm_sampling_state{`+gpuSel+`, state="idle-released"} == 1) or vector(0)`))
	d.WithPanel(single("Mean SM active", "SM activity averaged over the selected GPUs.", "percentunit",
		`avg(cupti_sm_active_ratio{`+gpuSel+`})`))
	d.WithPanel(single("Idle GPUs held by pods", "GPUs allocated to a pod whose SMs were active less than 1% of the last 30 minutes.", "short",
		`count(avg_over_time(cupti_sm_active_ratio{`+gpuSel+`, pod!=""}[30m]) < 0.01) or vector(0)`))

	d.WithRow(dashboard.NewRowBuilder("Activity by GPU (window mean)"))
	for _, g := range []int{0, 1, 3, 7} {
		m := deviceGauges[g]
		d.WithPanel(series(m.title, m.desc+" Mean over the exporter's window.", "percentunit", 12,
			query(m.name+`_ratio{`+gpuSel+`}`, byGPU)))
	}

	d.WithRow(dashboard.NewRowBuilder("Interconnect"))
	d.WithPanel(series("PCIe throughput", "Bytes per second over PCIe, received (rx) and transmitted (tx) by each GPU.", "Bps", 12,
		query(`sum by (instance, gpu, direction) (rate(cupti_pcie_bytes_total{`+gpuSel+`}[$__rate_interval]))`, byGPU+" {{direction}}")))
	d.WithPanel(series("NVLink throughput", "Bytes per second over NVLink, received (rx) and transmitted (tx) by each GPU."+nvlinkDesc, "Bps", 12,
		query(`sum by (instance, gpu, direction) (rate(cupti_nvlink_bytes_total{`+gpuSel+`}[$__rate_interval]))`, byGPU+" {{direction}}")).
		NoValue(nvlinkNoData))

	healthRow(d, gpuSel, true)

	d.WithRow(dashboard.NewRowBuilder("GPUs held by pods"))
	d.WithPanel(table.NewPanelBuilder().Title("SM activity of GPUs held by pods").
		Description("Mean SM activity over the dashboard's time range of every GPU allocated to a pod (kubelet pod-resources), least used first.").
		Datasource(ds).Span(24).Height(10).Unit("percentunit").
		WithTarget(instantTable(`sort(avg by (namespace, pod, container, instance, gpu, uuid) (avg_over_time(cupti_sm_active_ratio{` + gpuSel + `, pod!=""}[$__range])))`)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true},
			"renameByName":  map[string]any{"Value": "SM active (mean)"},
		}}))
	return d
}

// healthRow adds the device health row (package health, NVML): memory, power,
// temperature, clocks and their throttle reasons, XID errors, ECC, row remapping and NVML's
// utilisation beside SM active. fleet: one series per GPU across nodes, else one GPU.
func healthRow(d *dashboard.DashboardBuilder, sel string, fleet bool) {
	const nvmlNote = " From NVML (the health source, --health.enabled; recordings carry it as health frames)."
	by, leg := "", ""
	if fleet {
		by, leg = "instance, gpu", "{{instance}} GPU {{gpu}} "
	}
	// sum sums expr by the fleet's per-GPU labels and extra (comma-separated); on one GPU
	// only by extra, and not at all without extra.
	sum := func(expr, extra string) string {
		l := strings.Trim(by+", "+extra, ", ")
		if l == "" {
			return expr
		}
		return `sum by (` + l + `) (` + expr + `)`
	}
	add := func(p *timeseries.PanelBuilder, title string) {
		d.WithPanel(p)
	}
	d.WithRow(dashboard.NewRowBuilder("Device health (NVML)"))
	if fleet {
		gpuLeg := strings.TrimSpace(leg)
		add(series("Memory used", "Frame-buffer memory in use as a share of the GPU's memory."+nvmlNote, "percentunit", 8,
			query(`cupti_gpu_memory_used_bytes{`+sel+`} / cupti_gpu_memory_total_bytes{`+sel+`}`, gpuLeg)), "Memory used")
		add(series("Power draw", "Power draw of each GPU."+nvmlNote, "watt", 8,
			query(sum(`cupti_gpu_power_watts{`+sel+`}`, ""), gpuLeg)), "Power draw")
		add(series("Temperature", "GPU die temperature."+nvmlNote, "celsius", 8,
			query(sum(`cupti_gpu_temperature_celsius{`+sel+`}`, ""), gpuLeg)), "Temperature")
	} else {
		add(series("Memory used and total", "Frame-buffer memory in use and the GPU's memory size."+nvmlNote, "bytes", 8,
			query(`cupti_gpu_memory_used_bytes{`+sel+`}`, "used"),
			query(`cupti_gpu_memory_total_bytes{`+sel+`}`, "total")), "Memory used and total")
		add(series("Power and limit", "Power draw and the enforced power limit."+nvmlNote, "watt", 8,
			query(`cupti_gpu_power_watts{`+sel+`}`, "draw"),
			query(`cupti_gpu_power_limit_watts{`+sel+`}`, "limit")), "Power and limit")
		add(series("Temperature", "GPU die and memory (HBM) temperature."+nvmlNote, "celsius", 8,
			query(`cupti_gpu_temperature_celsius{`+sel+`}`, "GPU"),
			query(`cupti_gpu_memory_temperature_celsius{`+sel+`}`, "memory")), "Temperature")
		add(series("Clocks", "SM and memory clocks, and the SM clock's maximum."+nvmlNote, "hertz", 8,
			query(`cupti_gpu_clock_hertz{`+sel+`, clock=~"sm|memory"}`, "{{clock}}"),
			query(`cupti_gpu_max_clock_hertz{`+sel+`, clock="sm"}`, "sm max")), "Clocks")
		add(series("Clock-event reasons active", "The clock-event (throttle) reasons that held the clocks down at some time in the range, 1 while active (gpu_idle is the normal state of an idle GPU; a busy GPU at full clocks has none active)."+nvmlNote, "short", 8,
			query(`cupti_gpu_clock_event_reasons{`+sel+`} and on (uuid, reason) (max_over_time(cupti_gpu_clock_event_reasons{`+sel+`}[$__range]) == 1)`, "{{reason}}")), "Clock-event reasons active")
	}
	add(series("Time throttled by reason", "Share of time the clocks were held below the requested level, by policy (power, thermal, ...): 1 is all the time."+nvmlNote, "percentunit", 8,
		query(sum(`rate(cupti_gpu_clock_event_seconds_total{`+sel+`}[$__rate_interval])`, "reason"), leg+"{{reason}}")), "Time throttled by reason")
	add(series("XID errors", "XID errors per code counted since the exporter started, from NVML events (every one counted, not only the last): a step is a new error. 13, 31, 43 and 45 are usually the application's own faults; 48, 63, 64, 74, 79, 92, 94, 95 point at the hardware (CuptiGPUXidError)."+nvmlNote, "short", 8,
		query(sum(`cupti_gpu_xid_errors_total{`+sel+`}`, "xid"), leg+"XID {{xid}}")).
		NoValue("No XID error"), "XID errors")
	add(series("ECC errors", "ECC errors since the driver loaded (volatile), corrected and uncorrected; an uncorrected one killed the work that read it."+nvmlNote, "short", 8,
		query(sum(`cupti_gpu_ecc_errors_total{`+sel+`, counter="volatile"}`, "type"), leg+"{{type}}")), "ECC errors")
	add(series("Row remapping", "Memory rows remapped by cause, and 1 while a remapping waits for a GPU reset (pending) or failed (failed: replace the GPU)."+nvmlNote, "short", 8,
		query(sum(`cupti_gpu_remapped_rows{`+sel+`}`, "cause"), leg+"{{cause}} rows"),
		query(sum(`cupti_gpu_remapped_rows_pending{`+sel+`}`, ""), leg+"pending"),
		query(sum(`cupti_gpu_remapped_rows_failed{`+sel+`}`, ""), leg+"failed")), "Row remapping")
	add(series("NVML utilisation and SM active", "NVML's GPU utilisation (share of time one or more kernels ran: a single tiny kernel counts as busy) beside PM sampling's SM active (how much of the GPU worked)."+nvmlNote, "percentunit", 8,
		query(sum(`cupti_nvml_gpu_utilization_ratio{`+sel+`}`, ""), leg+"NVML utilisation"),
		query(sum(`cupti_sm_active_ratio{`+sel+`}`, ""), leg+"SM active")), "NVML utilisation and SM active")
	if !fleet {
		add(series("GPM activity (while PM Sampling is paused)", "SM, tensor and DRAM bandwidth activity from NVML GPM (Hopper and newer; --health.gpm, on in the chart): a unit apart from the PM counters that kept reporting on an H200 while ncu held them, so this panel shows activity when the PM Sampling panels are blank (paused, busy, idle-released). One value per health interval."+nvmlNote, "percentunit", 8,
			query(`cupti_gpm_sm_active_ratio{`+sel+`}`, "SM active (GPM)"),
			query(`cupti_gpm_tensor_active_ratio{`+sel+`}`, "tensor active (GPM)"),
			query(`cupti_gpm_dram_bandwidth_ratio{`+sel+`}`, "DRAM bandwidth (GPM)")).
			NoValue("No GPM: --health.gpm is off, or the GPU is older than Hopper"), "GPM activity")
	}
}

// notDeviceCounters matches the counters that are not device counters of PM sampling (or
// that have their own query): self-metrics, workload and attribution families.
const notDeviceCounters = "cupti_(pcie|nvlink)_bytes_total|cupti_(pm|activity|exporter|podresources|kernel|memcpy|memset|pod|attribution|gpu|nvml|health)_.+"

func gpuDetail() *dashboard.DashboardBuilder {
	d := newDashboard("cupti-gpu", "CUPTI / GPU detail",
		"Every PM sampling series of one GPU: the window mean beside the window maximum, the interconnect counters, and the sampler's own health.").
		WithVariable(labelVar("gpu", "GPU", `label_values(cupti_sm_active_ratio{cluster=~"$cluster", instance=~"$instance"}, uuid)`, false).IncludeAll(false))
	sel := gpuSel
	d.WithRow(dashboard.NewRowBuilder("Curated metrics: window mean and max"))
	for _, m := range deviceGauges {
		p := series(m.title, m.desc+" Solid: mean over each window; max: the highest sample in the window (bursts the mean hides).", "percentunit", 8,
			query(m.name+`_ratio{`+sel+`}`, "mean"),
			query(m.name+`_max_ratio{`+sel+`}`, "max"))
		if m.noData != "" {
			p.NoValue(m.noData)
		}
		d.WithPanel(p)
	}
	d.WithPanel(series("PCIe throughput", "Bytes per second over PCIe.", "Bps", 8,
		query(`sum by (direction) (rate(cupti_pcie_bytes_total{`+sel+`}[$__rate_interval]))`, "{{direction}}")))
	d.WithPanel(series("NVLink throughput", "Bytes per second over NVLink."+nvlinkDesc, "Bps", 8,
		query(`sum by (direction) (rate(cupti_nvlink_bytes_total{`+sel+`}[$__rate_interval]))`, "{{direction}}")).
		NoValue(nvlinkNoData))

	d.WithRow(dashboard.NewRowBuilder("Every sampled metric"))
	d.WithPanel(series("All ratio gauges (mean)", "Every *_ratio series of this GPU, including metrics added with --pmsample.metrics.", "percentunit", 12,
		query(`{__name__=~"cupti_.+_ratio", __name__!~"cupti_.+_(max|min)_ratio|cupti_(pm|nvml)_.+", `+sel+`}`, "{{__name__}}")))
	d.WithPanel(series("All ratio gauges (max)", "The window maximum of every *_ratio series of this GPU.", "percentunit", 12,
		query(`{__name__=~"cupti_.+_max_ratio", `+sel+`}`, "{{__name__}}")))
	// rate() drops __name__, so one rate over several families collides ("vector cannot
	// contain metrics with the same labelset" as soon as PCIe and NVLink share labels) and
	// leaves the legend blank: the curated counters get a query each, and other counters
	// (added with --pmsample.metrics) keep their name in a label through a subquery.
	d.WithPanel(series("All counters (rate)", "Per-second rate of every device counter of this GPU: PCIe and NVLink bytes by direction, and any cupti_*_total counter added with --pmsample.metrics (labelled by its name).", "short", 24,
		query(`sum by (direction) (rate(cupti_pcie_bytes_total{`+sel+`}[$__rate_interval]))`, "cupti_pcie_bytes_total {{direction}}"),
		query(`sum by (direction) (rate(cupti_nvlink_bytes_total{`+sel+`}[$__rate_interval]))`, "cupti_nvlink_bytes_total {{direction}}"),
		query(`sum by (counter, direction) (rate(label_replace({__name__=~"cupti_.+_total", __name__!~"`+notDeviceCounters+`", `+sel+`}, "counter", "$1", "__name__", "(.+)")[$__rate_interval:$__interval]))`, "{{counter}} {{direction}}")))

	d.WithRow(dashboard.NewRowBuilder("Sampler health"))
	d.WithPanel(series("Sampling state", "1 for the current PM sampling state: sampling, paused (POST /pause), busy (another profiler holds the counters), error, or idle-released (the GPU was idle: the session is let go until work starts)."+liveOnly, "short", 8,
		query(`cupti_pm_sampling_state{`+sel+`} == 1`, "{{state}}")).
		NoValue("Live exporters only: a replay has no sampler state"))
	d.WithPanel(series("Samples delivered and lost", "PM samples per second: delivered, and lost by reason, counted in samples (the samples the hardware interval implies for each stretch without a delivered one). Stacked, they add up to the configured rate. Expected losses: start (each session's first interval), rotation (--pmsample.multiplex switching groups), paused (POST /pause), busy (another profiler holds the counters), idle_release (from the first sign of work on an idle-released GPU to its first sample), duty_cycle (the released phases of --pmsample.duty-cycle), incomplete (a sample split between two decodes of the counter data image, about 0.1 % of samples at 1 ms on an H100); out_of_range means a sample held a value the hardware cannot produce and was left out (cupti_pm_samples_out_of_range_total names the metric: please report it); image_full, overflow, decode_error and gap mean the host did not keep up, and stall that a session went silent and was recreated (see docs/pm-sampling.md). Time released while idle is no loss (see Idle release).", "short", 8,
		query(`sum(rate(cupti_pm_samples_total{`+sel+`}[$__rate_interval]))`, "delivered"),
		query(`sum by (reason) (rate(cupti_pm_samples_lost_total{`+sel+`}[$__rate_interval]))`, "lost {{reason}}")).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	d.WithPanel(series("Window coverage", "Share of each statistics window covered by delivered samples; the window mean, max and min describe only the covered part (below 1: samples were lost).", "percentunit", 8,
		query(`cupti_pm_window_coverage_ratio{`+sel+`}`, "covered")))
	d.WithPanel(series("Sampling interval in effect", "The hardware sampling interval the device runs at: the configured --pmsample.interval, or longer after an automatic backoff (--pmsample.backoff)."+liveOnly, "s", 8,
		query(`cupti_pm_sampling_interval_seconds{`+sel+`}`, "interval")).
		NoValue("Live exporters only: a replay has no sampler"))
	d.WithPanel(series("Time between decodes", "Median and 99th percentile of the time between consecutive decodes of the hardware buffer (the decode period: 250 ms by default at 1 ms sampling, 100 ms below). A decode that comes later than the period plus the counter data image's room (100 ms of samples at 1 kHz) loses samples to a full image (image_full above): a 99th percentile near that means the host keeps the decode thread waiting."+liveOnly, "s", 8,
		query(histQuantile("0.5", "cupti_pm_decode_gap_seconds", sel, "gpu"), "median"),
		query(histQuantile("0.99", "cupti_pm_decode_gap_seconds", sel, "gpu"), "p99")).
		NoValue("Live exporters only: a replay has no sampler"))
	d.WithPanel(series("Idle release", "Share of time the PM session was released because the GPU was idle (no samples and no PM power cost, by design), and share of time missed: from the first sign of work on a released GPU to its first sample after the retake (work that ran unsampled)."+liveOnly, "percentunit", 8,
		query(`sum(rate(cupti_pm_idle_released_seconds_total{`+sel+`}[$__rate_interval]))`, "released while idle"),
		query(`sum(rate(cupti_pm_idle_missed_seconds_total{`+sel+`}[$__rate_interval]))`, "missed after wake")).
		NoValue("Live exporters only, with --pmsample.idle-release-after"))
	d.WithPanel(series("Multiplexed metric coverage", "With --pmsample.multiplex, the fraction of each window during which each rotated metric was on the counters; below 1 its gauges describe only part of the window. Empty without multiplexing (every metric is sampled all the time) and on a replay.", "percentunit", 8,
		query(`cupti_pm_observed_ratio{`+sel+`}`, "{{metric}}")).
		NoValue("Only with --pmsample.multiplex: every metric is sampled all the time"))
	healthRow(d, sel, false)
	return d
}

func workloads() *dashboard.DashboardBuilder {
	d := newDashboard("cupti-workloads", "CUPTI / Workloads",
		"Kernels and memory copies of the processes that load the cupti-exporter injection library: top kernels by GPU time, kernel duration distributions (native histograms where the Prometheus keeps them, classic buckets otherwise), copy bandwidth by kind, pageable copies, and each pod's share of GPU time.").
		WithVariable(labelVar("namespace", "Namespace", `label_values(cupti_kernel_gpu_seconds_total{cluster=~"$cluster", instance=~"$instance"}, namespace)`, true)).
		WithVariable(labelVar("pod", "Pod", `label_values(cupti_kernel_gpu_seconds_total{cluster=~"$cluster", instance=~"$instance", namespace=~"$namespace"}, pod)`, true)).
		WithVariable(labelVar("kernel", "Kernel", `label_values({__name__=~"cupti_kernel_duration_seconds|cupti_kernel_duration_seconds_count", cluster=~"$cluster", instance=~"$instance", pod=~"$pod"}, kernel)`, true))
	ksel := podSel + `, kernel=~"$kernel"`

	d.WithRow(dashboard.NewRowBuilder("GPU time"))
	d.WithPanel(series("GPU share per pod", "Kernel time per second of wall time, per pod: 1 is one GPU kept busy by the pod's kernels.", "percentunit", 12,
		query(`sum by (namespace, pod) (rate(cupti_kernel_gpu_seconds_total{`+podSel+`}[$__rate_interval]))`, "{{namespace}}/{{pod}}")).
		Max(8).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	d.WithPanel(bargauge.NewPanelBuilder().Title("Top kernels by GPU time").
		Description("Kernels with the most GPU time over the dashboard's range (sum of the duration histograms).").
		Datasource(ds).Span(12).Height(8).Unit("s").
		Orientation(common.VizOrientationHorizontal).DisplayMode(common.BarGaugeDisplayModeGradient).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(`topk(15, ` + histSumIncrease("cupti_kernel_duration_seconds", ksel, "kernel", "$__range") + `)`).
			LegendFormat("{{kernel}}").Instant().RefId("A")))
	d.WithPanel(series("Kernel launches per second", "Kernels completed per second, top 10 kernels.", "short", 12,
		query(`topk(10, `+histCount("cupti_kernel_duration_seconds", ksel, "kernel")+`)`, "{{kernel}}")))
	d.WithPanel(series("Kernel duration p50 / p99", "Duration quantiles per kernel, from the native histograms (exact to a few percent) or, on a Prometheus without them, the classic buckets (coarser).", "s", 12,
		query(histQuantile("0.5", "cupti_kernel_duration_seconds", ksel, "kernel"), "p50 {{kernel}}"),
		query(histQuantile("0.99", "cupti_kernel_duration_seconds", ksel, "kernel"), "p99 {{kernel}}")))

	d.WithRow(dashboard.NewRowBuilder("Kernel durations"))
	d.WithPanel(histogramHeatmap("Kernel duration distribution", "Kernel durations of the selected kernels, from cupti_kernel_duration_seconds (native histogram, or classic buckets).",
		histHeatmap("cupti_kernel_duration_seconds", ksel)))
	d.WithPanel(histogramHeatmap("Kernel duration per pod", "Kernel durations of all the selected pods' kernels, from cupti_pod_kernel_duration_seconds (native histogram, or classic buckets).",
		histHeatmap("cupti_pod_kernel_duration_seconds", podSel)))

	d.WithRow(dashboard.NewRowBuilder("Memory copies"))
	d.WithPanel(series("Copy bandwidth by kind", "Bytes per second copied, by direction (HtoD, DtoH, DtoD, PtoP) and host memory kind.", "Bps", 12,
		query(`sum by (copy_kind, host_memory) (rate(cupti_memcpy_bytes_total{`+podSel+`}[$__rate_interval]))`, "{{copy_kind}} {{host_memory}}")))
	d.WithPanel(series("Pageable copies per pod", "Bytes per second copied from or to pageable host memory: staged through a bounce buffer, slower, and never overlapped with kernels. Pin these buffers.", "Bps", 12,
		query(`sum by (namespace, pod, copy_kind) (rate(cupti_memcpy_bytes_total{`+podSel+`, host_memory="pageable"}[$__rate_interval]))`, "{{namespace}}/{{pod}} {{copy_kind}}")))
	d.WithPanel(histogramHeatmap("Copy duration distribution", "Durations of memory copies, from cupti_memcpy_duration_seconds (native histogram, or classic buckets).",
		histHeatmap("cupti_memcpy_duration_seconds", podSel)))
	d.WithPanel(series("Memset bandwidth", "Bytes per second set by memset operations.", "Bps", 12,
		query(`sum by (namespace, pod) (rate(cupti_memset_bytes_total{`+podSel+`}[$__rate_interval]))`, "{{namespace}}/{{pod}}")))

	d.WithRow(dashboard.NewRowBuilder("Tracing health"))
	d.WithPanel(series("Traced processes", "Processes connected to each exporter with the injection library loaded.", "short", 12,
		query(`sum by (instance) (cupti_activity_processes{`+nodeSel+`})`, "{{instance}}")))
	d.WithPanel(series("Dropped records", "Activity records lost per second, by reason: metrics undercount while this is above 0.", "short", 12,
		query(`sum by (instance, reason) (rate(cupti_activity_dropped_records_total{`+nodeSel+`}[$__rate_interval]))`, "{{instance}} {{reason}}")))
	return d
}

// whoUses is the "who uses this GPU" view (issue 9): PM-sampled device counters attributed
// to the kernels that ran while each sample was taken, and to their pods, with the coverage
// that says how much of the device's time the attribution could explain. Ratios are
// attributed as active seconds, so rate(active) / rate(sampled) is the utilisation while a
// kernel (or pod) ran.
func whoUses() *dashboard.DashboardBuilder {
	d := newDashboard("cupti-attribution", "CUPTI / Who uses this GPU",
		"Device counters (DRAM, NVLink, PCIe, tensor and SM activity) attributed to kernels and pods by time: each PM sample is shared over the kernels that ran during it. Coverage shows which share of the GPU's time was traced, idle or untraced.").
		WithVariable(labelVar("gpu", "GPU", `label_values(cupti_attribution_seconds_total{cluster=~"$cluster", instance=~"$instance"}, uuid)`, true)).
		WithVariable(labelVar("namespace", "Namespace", `label_values(cupti_pod_sampled_seconds_total{cluster=~"$cluster", instance=~"$instance", uuid=~"$gpu"}, namespace)`, true)).
		WithVariable(labelVar("pod", "Pod", `label_values(cupti_pod_sampled_seconds_total{cluster=~"$cluster", instance=~"$instance", uuid=~"$gpu", namespace=~"$namespace"}, pod)`, true))
	psel := gpuSel + `, namespace=~"$namespace", pod=~"$pod"`
	rate := func(name, sel string) string { return `rate(` + name + `{` + sel + `}[$__rate_interval])` }
	// while is the utilisation of a ratio while each member of by ran: active / sampled seconds.
	while := func(active, sampled, sel, by string) string {
		return `sum by (` + by + `) (` + rate(active, sel) + `) / sum by (` + by + `) (` + rate(sampled, sel) + `)`
	}
	// dramSum is read plus write DRAM bytes of a scope (cupti_kernel, cupti_pod) by the
	// labels by: the attribution counts them in two families, as the device does
	// (cupti_dram_read_bytes_total, cupti_dram_write_bytes_total), not with a direction label.
	dramSum := func(scope, fn, sel, by string) string {
		rng := "$__rate_interval"
		if fn == "increase" {
			rng = "$__range"
		}
		one := func(dir string) string {
			return `sum by (` + by + `) (` + fn + `(` + scope + `_dram_` + dir + `_bytes_total{` + sel + `}[` + rng + `]))`
		}
		return one("read") + ` + ` + one("write")
	}
	stacked := common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)
	const kernelNote = ` "(idle)" is time no traced kernel ran, "(untraced)" time of processes not traced (no injection library, or outside its duty cycle), "other" the kernels beyond the top-K label set.`

	d.WithRow(dashboard.NewRowBuilder("Coverage"))
	d.WithPanel(series("Traced, idle and untraced time", "Share of each GPU's sampled time that ran traced kernels, no kernel (idle), or work the exporter could not see (untraced). Only the traced share is attributed to kernels and pods.", "percentunit", 12,
		query(`sum by (instance, gpu, kind) (`+rate("cupti_attribution_seconds_total", gpuSel)+`) / ignoring (kind) group_left sum by (instance, gpu) (`+rate("cupti_attribution_seconds_total", gpuSel)+`)`, "{{instance}} GPU {{gpu}} {{kind}}")).
		Stacking(stacked))
	d.WithPanel(series("Attribution lag", "How far behind real time attribution runs: PM samples wait for late kernel records up to the watermark before they are shared out.", "s", 6,
		query(`max by (instance, gpu) (cupti_attribution_lag_seconds{`+gpuSel+`})`, "{{instance}} GPU {{gpu}}")))
	d.WithPanel(series("Late and dropped records", "Kernel records that arrived after their samples were attributed (late), and records the join could not use, by reason: the attribution undercounts these kernels.", "short", 6,
		query(`sum by (instance) (rate(cupti_attribution_late_records_total{`+nodeSel+`}[$__rate_interval]))`, "{{instance}} late"),
		query(`sum by (instance, reason) (rate(cupti_attribution_dropped_records_total{`+nodeSel+`}[$__rate_interval]))`, "{{instance}} dropped {{reason}}")))

	d.WithRow(dashboard.NewRowBuilder("By kernel"))
	d.WithPanel(series("GPU time by kernel", "Seconds of sampled device time per second spent in each kernel (concurrent kernels share a sample)."+kernelNote, "percentunit", 12,
		query(`topk(10, sum by (kernel) (`+rate("cupti_kernel_sampled_seconds_total", gpuSel)+`))`, "{{kernel}}")).
		Stacking(stacked))
	d.WithPanel(series("DRAM bandwidth by kernel", "Device memory bytes per second (read + write) attributed to each kernel."+kernelNote, "Bps", 12,
		query(`topk(10, `+dramSum("cupti_kernel", "rate", gpuSel, "kernel")+`)`, "{{kernel}}")).
		Stacking(stacked))
	d.WithPanel(series("NVLink transmit by kernel", "NVLink bytes per second sent while each kernel ran. Transmit is attributed on the sender, the kernel that pushed the bytes; received bytes may have been pushed by a peer GPU's kernel while this GPU ran something else."+nvlinkDesc+kernelNote, "Bps", 12,
		query(`topk(10, sum by (kernel) (`+rate("cupti_kernel_nvlink_bytes_total", gpuSel+`, direction="tx"`)+`))`, "{{kernel}}")).
		Stacking(stacked).NoValue(nvlinkNoData))
	d.WithPanel(series("PCIe by kernel", "PCIe bytes per second received (rx) and transmitted (tx) while each kernel ran."+kernelNote, "Bps", 12,
		query(`topk(10, sum by (kernel, direction) (`+rate("cupti_kernel_pcie_bytes_total", gpuSel)+`))`, "{{kernel}} {{direction}}")))
	d.WithPanel(series("Tensor pipe while each kernel ran", "Tensor pipe active while the kernel ran: attributed active seconds over the kernel's sampled seconds (1 = the pipe busy all the time the kernel ran).", "percentunit", 8,
		query(`topk(10, `+while("cupti_kernel_tensor_pipe_active_seconds_total", "cupti_kernel_sampled_seconds_total", gpuSel, "kernel")+`)`, "{{kernel}}")))
	d.WithPanel(series("SM active while each kernel ran", "SM active while the kernel ran: attributed active seconds over the kernel's sampled seconds.", "percentunit", 8,
		query(`topk(10, `+while("cupti_kernel_sm_active_seconds_total", "cupti_kernel_sampled_seconds_total", gpuSel, "kernel")+`)`, "{{kernel}}")))
	d.WithPanel(series("DRAM active while each kernel ran", "Device memory interface busy while the kernel ran: attributed active seconds over the kernel's sampled seconds.", "percentunit", 8,
		query(`topk(10, `+while("cupti_kernel_dram_active_seconds_total", "cupti_kernel_sampled_seconds_total", gpuSel, "kernel")+`)`, "{{kernel}}")))
	d.WithPanel(table.NewPanelBuilder().Title("Kernels over the time range").
		Description("Per kernel over the dashboard's range: DRAM bytes, NVLink bytes sent, and tensor pipe active while it ran.").
		Datasource(ds).Span(24).Height(10).
		WithTarget(instantTable(dramSum("cupti_kernel", "increase", gpuSel, "kernel")).RefId("A")).
		WithTarget(instantTable(`sum by (kernel) (increase(cupti_kernel_nvlink_bytes_total{` + gpuSel + `, direction="tx"}[$__range]))`).RefId("B")).
		WithTarget(instantTable(`sum by (kernel) (increase(cupti_kernel_tensor_pipe_active_seconds_total{` + gpuSel + `}[$__range])) / sum by (kernel) (increase(cupti_kernel_sampled_seconds_total{` + gpuSel + `}[$__range]))`).RefId("C")).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true},
			"renameByName":  map[string]any{"Value #A": "DRAM bytes", "Value #B": "NVLink bytes sent", "Value #C": "Tensor pipe active while running"},
		}}))

	d.WithRow(dashboard.NewRowBuilder("By pod"))
	const sourceNote = ` source="kernel": from the pod's kernel records; source="nvml": a pod (or, under pod="", processes outside pods) that loads no injection library, estimated from NVML's per-process SM shares.`
	d.WithPanel(series("GPU time by pod", "Seconds of sampled device time per second spent in each pod's kernels: on a shared GPU (time-slicing, MPS) each pod's own share, not the device's."+sourceNote, "percentunit", 12,
		query(`sum by (namespace, pod, source) (`+rate("cupti_pod_sampled_seconds_total", psel)+`)`, "{{namespace}}/{{pod}} ({{source}})")).
		Stacking(stacked))
	d.WithPanel(series("Untraced process present", "Share of each GPU's recently attributed time (one-minute half-life) during which a process the exporter does not trace was on the GPU (NVML showed it running, or a traced process traced only part of the time). Where it is high, the per-pod numbers beside it are estimates: docs/attribution.md, \"Untraced processes\", says how accurate.", "percentunit", 12,
		query(`max by (instance, gpu) (cupti_attribution_untraced_present_ratio{`+gpuSel+`})`, "{{instance}} GPU {{gpu}}")))
	d.WithPanel(series("Estimated under uncertainty", "Share of each GPU's recently attributed time (one-minute half-life) whose split over processes rested on an estimate, and of each pod's sampled time: an untraced process whose turns the GPU's context-switch counter does not tell, NVML's period shares, clients of the MPS server told apart by their kernels' rates alone, a MIG GPU. Read the per-pod numbers of such time with the error docs/attribution.md measured for the way the GPU is shared.", "percentunit", 12,
		query(`max by (instance, gpu) (cupti_attribution_uncertain_ratio{`+gpuSel+`})`, "{{instance}} GPU {{gpu}}"),
		query(while("cupti_pod_uncertain_seconds_total", "cupti_pod_sampled_seconds_total", psel, "namespace, pod"), "{{namespace}}/{{pod}}")))
	d.WithPanel(series("How the GPU is shared", "Share of each GPU's attributed time by how it was shared: time_sliced (processes taking turns), mps (MPS clients side by side), mig (MIG instances, not split by process); the rest had one process or none. The per-pod numbers carry the error docs/attribution.md measured for that way of sharing: within about 5 % time-sliced, off by tens of percent under MPS where clients contend for memory bandwidth.", "percentunit", 12,
		query(`sum by (instance, gpu, mode) (`+rate("cupti_attribution_sharing_seconds_total", gpuSel)+`) / ignoring (mode) group_left sum by (instance, gpu) (`+rate("cupti_attribution_seconds_total", gpuSel)+`)`, "{{instance}} GPU {{gpu}} {{mode}}")).
		Stacking(stacked))
	d.WithPanel(series("Tensor pipe while each pod ran", "Tensor pipe active while the pod's kernels ran: attributed active seconds over the pod's sampled seconds.", "percentunit", 12,
		query(while("cupti_pod_tensor_pipe_active_seconds_total", "cupti_pod_sampled_seconds_total", psel, "namespace, pod"), "{{namespace}}/{{pod}}")))
	d.WithPanel(series("DRAM bandwidth by pod", "Device memory bytes per second attributed to each pod's kernels, read and write."+sourceNote, "Bps", 12,
		query(`sum by (namespace, pod, source) (`+rate("cupti_pod_dram_read_bytes_total", psel)+`)`, "{{namespace}}/{{pod}} ({{source}}) read"),
		query(`sum by (namespace, pod, source) (`+rate("cupti_pod_dram_write_bytes_total", psel)+`)`, "{{namespace}}/{{pod}} ({{source}}) write")))
	d.WithPanel(series("NVLink by pod", "NVLink bytes per second while each pod's kernels ran; transmit (tx) is attributed on the sender."+nvlinkDesc, "Bps", 12,
		query(`sum by (namespace, pod, direction) (`+rate("cupti_pod_nvlink_bytes_total", psel)+`)`, "{{namespace}}/{{pod}} {{direction}}")).
		NoValue(nvlinkNoData))
	return d
}

// all lists the dashboards by file name.
var all = []struct {
	file  string
	build func() *dashboard.DashboardBuilder
}{
	{"fleet-overview.json", fleetOverview},
	{"gpu-detail.json", gpuDetail},
	{"workloads.json", workloads},
	{"who-uses-this-gpu.json", whoUses},
}

func build(b *dashboard.DashboardBuilder) (dashboard.Dashboard, error) {
	d, err := b.Build()
	if err != nil {
		return d, fmt.Errorf("building dashboard: %w", err)
	}
	return d, nil
}
