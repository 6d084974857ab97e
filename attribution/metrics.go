package attribution

import (
	"slices"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Label names of the attributed families (before the source metric's own labels).
var (
	kernelLabelNames = []string{"gpu", "uuid", "kernel"}
	podLabelNames    = []string{"gpu", "uuid", "namespace", "pod", "container", "source"}
	deviceLabelNames = []string{"gpu", "uuid"}
)

// Kernel labels of the time no kernel covers, and of the copies and fills that are joined
// like kernels.
const (
	labelIdle     = "(idle)"
	labelUntraced = "(untraced)"
	labelMemcpy   = "(memcpy)"
	labelMemset   = "(memset)"
	labelOther    = "other"
)

// fixedKernelLabels are the kernel labels that name no kernel.
var fixedKernelLabels = []string{labelIdle, labelUntraced, labelMemcpy, labelMemset, labelOther}

// descs are the fixed families the Attributor emits.
var descs = snapshot.NewTable()

var (
	kernelSampledDesc   = descs.Counter("cupti_kernel_sampled_seconds_total", "seconds", "cupti.attribution.kernel.sampled_time", "s", "PM sample time attributed to each kernel: its overlap with the samples, concurrent kernels sharing it; kernel=\"(idle)\" and \"(untraced)\" carry the time no traced kernel covers. The denominator of the attributed utilisations.", kernelLabelNames...)
	podSampledDesc      = descs.Counter("cupti_pod_sampled_seconds_total", "seconds", "cupti.attribution.pod.sampled_time", "s", "PM sample time attributed to the kernels of each pod (source=\"kernel\"), or estimated from NVML's per-process SM shares for processes that load no injection library (source=\"nvml\"); processes without a pod under pod=\"\".", podLabelNames...)
	kindSecondsDesc     = descs.Counter("cupti_attribution_seconds_total", "seconds", "cupti.attribution.time", "s", "Attributed PM sample time by kind: traced (a kernel of a traced process ran), idle (every process on the GPU traced that time and none ran a kernel), untraced (some process on the GPU did not trace it).", "gpu", "uuid", "kind")
	lagDesc             = descs.Gauge("cupti_attribution_lag_seconds", "seconds", "cupti.attribution.lag", "s", "End of the newest PM sample minus the end of the newest attributed one (the watermark plus the batch cadence when all is well).", deviceLabelNames...)
	lateRecordsDesc     = descs.Counter("cupti_attribution_late_records_total", "", "cupti.attribution.records.late", "{record}", "Kernel records that arrived after (part of) their time was attributed; only the part after the attributed frontier is joined.", deviceLabelNames...)
	lateSecondsDesc     = descs.Counter("cupti_attribution_late_seconds_total", "seconds", "cupti.attribution.late_time", "s", "Kernel time of late records that fell before the attributed frontier (that time went to the kernels known then, or to idle/untraced).", deviceLabelNames...)
	pendingDesc         = descs.Gauge("cupti_attribution_pending_records", "", "cupti.attribution.records.pending", "{record}", "Kernel records held for PM samples that are not attributed yet.", deviceLabelNames...)
	joinSecondsDesc     = descs.Counter("cupti_attribution_join_seconds_total", "seconds", "cupti.attribution.join_time", "s", "Wall time the exporter spent joining samples with records (the cost of attribution).", deviceLabelNames...)
	untracedPresentDesc = descs.Gauge("cupti_attribution_untraced_present_ratio", "ratio", "cupti.attribution.untraced_present", "1", "Share of the recently attributed sample time (one-minute half-life) during which a process the join does not trace was present on the GPU: NVML showed an untraced process running, or a traced process did not trace part of it. Per-kernel and per-pod numbers of such time are estimates (docs/attribution.md, \"Untraced processes\").", deviceLabelNames...)
	sharingDesc         = descs.Counter("cupti_attribution_sharing_seconds_total", "seconds", "cupti.attribution.sharing_time", "s", "Attributed PM sample time of a shared GPU by how it was shared: time_sliced (two or more processes taking turns, or traced ones whose MPS role NVML did not say), mps (MPS clients running side by side), mig (MIG instances: nothing is split by process); the rest of cupti_attribution_seconds_total had one process or none on the GPU. The per-pod figures of each carry the error docs/attribution.md measured for that way of sharing. A mode has its series from its first second on.", "gpu", "uuid", "mode")
	uncertainDesc       = descs.Gauge("cupti_attribution_uncertain_ratio", "ratio", "cupti.attribution.uncertain", "1", "Share of the recently attributed sample time (one-minute half-life) whose split over processes rested on an estimate: NVML's period shares (an untraced process on a GPU whose turns are not known), the rate fit alone between the records of several processes, or turns the context-switch counter left in doubt. The per-pod numbers of such time carry the error of docs/attribution.md's table for the sharing mode. A GPU has the series from its first such split on.", deviceLabelNames...)
	podUncertainDesc    = descs.Counter("cupti_pod_uncertain_seconds_total", "seconds", "cupti.attribution.pod.uncertain_time", "s", "Of cupti_pod_sampled_seconds_total, the seconds whose split rested on an estimate (see cupti_attribution_uncertain_ratio); only pods that had such time have the series.", podLabelNames...)
	droppedObsDesc      = descs.Counter("cupti_attribution_dropped_process_observations_total", "", "cupti.attribution.process_observations.dropped", "{observation}", "NVML process observations the join could not use, by reason (invalid: end <= start; unknown_device; late: the attributed frontier had passed their period; full: more than 64 held for a GPU, the oldest dropped).", "reason")
	memoryDesc          = descs.Gauge("cupti_attribution_memory_bytes", "bytes", "cupti.attribution.memory", "By", "Memory the attribution join holds for clients (records waiting for their samples, kernel classes, series, join buffers), as charged to the activity memory budget (--activity.memory-budget); its share of cupti_activity_memory_bytes.")
	foldedClassesDesc   = descs.Counter("cupti_attribution_folded_kernel_names_total", "", "cupti.attribution.kernel_names.folded", "{name}", "Kernel names the join told apart from no other and joined as kernel=\"other\", by reason (table_full: 8,192 names known; memory_budget: the memory budget was full).", "reason")
	droppedRecordsDesc  = descs.Counter("cupti_attribution_dropped_records_total", "", "cupti.attribution.records.dropped", "{record}", "Kernel records the join could not use, by reason (pending_full, memory_budget, bad_span, far_clock, ends_ahead: ends over a minute past the newest sample and the wall clock, overlap_limit: more than 8,192 records overlap one sample, unknown_device, unknown_process).", "reason")
	droppedSamplesDesc  = descs.Counter("cupti_attribution_dropped_samples_total", "", "cupti.attribution.samples.dropped", "{sample}", "PM samples the join could not use, by reason (invalid: end <= start, NaN or wrong value count; before_frontier: the sample starts before samples already attributed).", "gpu", "uuid", "reason")
	badCoverageDesc     = descs.Counter("cupti_attribution_bad_coverage_spans_total", "", "cupti.attribution.coverage.bad_spans", "{span}", "Traced-time spans from processes that were malformed (bad_span: end <= start), out of order or overlapping an earlier span (out_of_order: merged anyway), far from the sample clock (far_clock: ignored) or from an unknown process.", "reason")
)

// Reasons that always have a series.
var (
	// ends_ahead and overlap_limit only come from made-up records: their series appear at the
	// first (two fewer series per node for the series budget, docs/sizing.md).
	recordDropReasons = []string{"pending_full", "memory_budget", "bad_span", "far_clock", "unknown_device", "unknown_process"}
	foldReasons       = []string{"table_full", "memory_budget"}
	sampleDropReasons = []string{"invalid", "before_frontier"}
	coverageReasons   = []string{"bad_span", "out_of_order", "far_clock", "unknown_process"}
	kindLabels        = [...]string{"traced", "idle", "untraced"}
	sharingLabels     = [...]string{"time_sliced", "mps", "mig"}
)

// Descs lists the fixed families the Attributor emits (the per-metric families depend on the
// metrics sampled), for checks of the names dashboards and rules query.
func Descs() []*snapshot.Desc { return descs.Descs() }

// quantity is what a PM metric attributes: bytes (a counter's value) or active seconds (a
// ratio times the sample's duration).
type quantity uint8

const (
	quantityCount   quantity = iota // counter: value x scale
	quantitySeconds                 // ratio: value x scale x sample seconds
	quantityRate                    // per-second gauge: value x scale x sample seconds
)

// metric is one PM metric as the join attributes it.
type metric struct {
	perfworks string
	ok        bool // false: not attributable (left out)
	ctxsw     bool // context-switch cycles: tells the owner of a sample (ownership.go), not attributed
	dramRead  bool // DRAM read bytes: how fast a turn read tells whose it was (turns.go)
	engine    bool // the graphics engine's active share: how much of a sample anything ran (ownership.go)
	pipe      bool // a pipe's active share (tensor, FP64, ...): a kernel uses the pipe or not (turns.go)
	q         quantity
	scale     float64
	labels    []string // the source metric's constant label values (direction)
	kernel    *snapshot.Desc
	pod       *snapshot.Desc
	// serveKernel and servePod: the family is served (WithKernelFamilies, WithPodFamilies);
	// the values are attributed either way.
	serveKernel, servePod bool
}

// derived names the kernel and pod families of a mapped PM metric:
//
//	cupti_<stem>_ratio              -> cupti_kernel_<stem>_seconds_total, cupti_pod_<stem>_seconds_total
//	cupti_<stem>_total              -> cupti_kernel_<stem>_total,         cupti_pod_<stem>_total
//	cupti_<stem>_<unit>_per_second  -> cupti_kernel_<stem>_<unit>_total,  cupti_pod_<stem>_<unit>_total
//
// Other gauges (per-cycle averages and the like) have no meaningful sum over time: ok=false.
func derived(m mapping.Metric) (kernel, pod *snapshot.Desc, q quantity, ok bool) {
	d := m.Desc
	rest := strings.TrimPrefix(d.Name, mapping.NamePrefix)
	var stem, unit, ucum, what string
	switch {
	case d.Kind == snapshot.KindCounter:
		stem, unit, ucum, q = strings.TrimSuffix(rest, "_total"), d.Unit, d.OTelUnit, quantityCount
		what = "split over the kernels that overlap each PM sample"
	case d.Kind == snapshot.KindGauge && d.Unit == "ratio":
		stem, unit, ucum, q = strings.TrimSuffix(rest, "_ratio")+"_seconds", "seconds", "s", quantitySeconds
		what = "as active seconds (ratio x sample time) split over the kernels that overlap each PM sample"
	case d.Kind == snapshot.KindGauge && strings.HasSuffix(d.Unit, "_per_second"):
		base := strings.TrimSuffix(d.Unit, "_per_second")
		stem = strings.TrimSuffix(strings.TrimSuffix(rest, "_per_second"), "_"+base) + "_" + base
		unit, ucum, q = base, strings.TrimSuffix(d.OTelUnit, "/s"), quantityRate
		what = "as a quantity (rate x sample time) split over the kernels that overlap each PM sample"
	default:
		return nil, nil, 0, false
	}
	if stem == "" || strings.HasPrefix(stem, "_") {
		return nil, nil, 0, false
	}
	extra := make([]string, len(m.Labels))
	for i, l := range m.Labels {
		extra[i] = l.Name
	}
	help := strings.TrimSuffix(d.Help, ".")
	if i := strings.Index(help, ". "); i >= 0 { // the first sentence of a curated help
		help = help[:i]
	}
	// The OTel name's stem, out of its namespace: hw.gpu.io (PCIe and NVLink, told apart by
	// the cupti.link attribute, which the derived families keep) gives cupti.attribution.kernel.io.
	otelStem := d.OTelName
	for _, ns := range []string{"hw.gpu.", "gpu.", "cupti."} {
		otelStem = strings.TrimPrefix(otelStem, ns)
	}
	otelStem = strings.TrimSuffix(otelStem, ".")
	mk := func(scope string, labels []string) *snapshot.Desc {
		return &snapshot.Desc{
			Name: mapping.NamePrefix + scope + "_" + stem + "_total", Kind: snapshot.KindCounter, Unit: unit,
			Help:     help + ", " + what + " (per " + scope + "; from " + d.Name + ").",
			OTelName: "cupti.attribution." + scope + "." + otelStem, OTelUnit: ucum,
			LabelNames: append(append([]string{}, labels...), extra...), OTelAttributes: slices.Clone(d.OTelAttributes),
		}
	}
	return mk("kernel", kernelLabelNames), mk("pod", podLabelNames), q, true
}
