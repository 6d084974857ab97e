package aggregate

import (
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// descs are the self-metric families of PM sampling the aggregator emits.
var descs = snapshot.NewTable()

// Descs lists the self-metric families the aggregator can emit, for the metrics reference and
// name checks: a recording does not exercise them all (cupti_pm_sampling_state needs a live
// sampler, cupti_pm_observed_ratio multiplexing).
func Descs() []*snapshot.Desc { return descs.Descs() }

// Self-metrics of PM sampling: one series per device (and reason, state or metric).
var (
	samplesDesc        = descs.Counter("cupti_pm_samples_total", "", "cupti.pm.samples", "{sample}", "PM samples evaluated and aggregated.", snapshot.DeviceLabelNames...)
	droppedDesc        = descs.Counter("cupti_pm_samples_dropped_total", "", "cupti.pm.samples.dropped", "{sample}", "PM samples decoded but not delivered: first_sample (began before Start), invalid (no valid span or value), incomplete (records split by a counter data image re-initialisation), out_of_range (a value or span the hardware cannot produce; cupti_pm_samples_out_of_range_total says which).", snapshot.DeviceLabels("reason")...)
	outOfRangeDesc     = descs.Counter("cupti_pm_samples_out_of_range_total", "", "cupti.pm.samples.out_of_range", "{sample}", "PM samples rejected because a value or the span was outside what the hardware can produce, by the first check that failed: the Perfworks metric, or span.", snapshot.DeviceLabels("metric")...)
	decodeFailuresDesc = descs.Counter("cupti_pm_decode_failures_total", "", "cupti.pm.decode.failures", "{decode}", "Decodes that lost data: image_full (COUNTER_DATA_FULL), overflow (hardware buffer), decode_error (the call failed). Counts decodes; cupti_pm_samples_lost_total counts the samples.", snapshot.DeviceLabels("reason")...)
	lostSamplesDesc    = descs.Counter("cupti_pm_samples_lost_total", "", "cupti.pm.samples.lost", "{sample}", "PM samples the hardware interval implies for time without a delivered sample, by cause; samples_total + samples_lost_total grow at the configured rate.", snapshot.DeviceLabels("reason")...)
	lostSecondsDesc    = descs.Counter("cupti_pm_lost_seconds_total", "seconds", "cupti.pm.lost.duration", "s", "Time without a delivered PM sample, by cause.", snapshot.DeviceLabels("reason")...)
	coverageDesc       = descs.Gauge("cupti_pm_window_coverage_ratio", "ratio", "cupti.pm.window.coverage", "1", "Share of the statistics window covered by delivered samples (the rest was lost); the window mean, max and min describe only the covered part.", snapshot.DeviceLabelNames...)
	intervalDesc       = descs.Gauge("cupti_pm_sampling_interval_seconds", "seconds", "cupti.pm.sampling.interval", "s", "Hardware sampling interval in effect (longer than configured after an automatic backoff).", snapshot.DeviceLabelNames...)
	overflowsDesc      = descs.Counter("cupti_pm_overflows_total", "", "cupti.pm.overflows", "{overflow}", "Hardware buffer overflows; each recreated the sampling session.", snapshot.DeviceLabelNames...)
	decodeDesc         = descs.Gauge("cupti_pm_decode_duration_seconds", "seconds", "cupti.pm.decode.duration", "s", "Time the last decode and evaluation of the hardware buffer took.", snapshot.DeviceLabelNames...)
	decodeGapDesc      = descs.Histogram("cupti_pm_decode_gap_seconds", "seconds", "cupti.pm.decode.gap", "s", "Time between consecutive decodes of a session: past the decode period by more than the counter data image's room for a late decode (100 ms of samples, at most 250 slots, at first), samples are lost to a full image.", snapshot.DeviceLabelNames...)
	cuptiCallDesc      = descs.Counter("cupti_pm_cupti_call_seconds_total", "seconds", "cupti.pm.cupti_call.duration", "s", "Time spent inside CUPTI calls of the decode path (decode, sample_info, evaluate, reset).", snapshot.DeviceLabels("call")...)
	threadCPUDesc      = descs.Counter("cupti_pm_decode_thread_cpu_seconds_total", "seconds", "cupti.pm.decode_thread.cpu", "s", "CPU time of the device's decode thread (CUPTI calls plus the exporter's own work on it); compare with cupti_pm_cupti_call_seconds_total and process_cpu_seconds_total.", snapshot.DeviceLabelNames...)
	stateDesc          = descs.Gauge("cupti_pm_sampling_state", "", "cupti.pm.sampling.state", "1", "1 for the current PM sampling state of the device (sampling, paused, busy, error, idle-released, yielded: given to a profiler found on the host).", snapshot.DeviceLabels("state")...)
	observedDesc       = descs.Gauge("cupti_pm_observed_ratio", "ratio", "cupti.pm.observed", "1", "Fraction of the window during which a multiplexed metric was on the counters.", snapshot.DeviceLabels("metric")...)
	lastSampleDesc     = descs.Gauge("cupti_pm_last_sample_timestamp_seconds", "seconds", "cupti.pm.last_sample.timestamp", "s", "End of the newest PM sample, Unix time.", snapshot.DeviceLabelNames...)
)

// Drop reasons, in the order of devAgg.dropped.
var dropReasons = [...]string{"first_sample", "invalid", "incomplete", "out_of_range"}

const (
	dropFirst = iota
	dropInvalid
	dropIncomplete
	dropOutOfRange
)

// Decode failure reasons, in the order of devAgg.failures.
var failureReasons = [...]string{"image_full", "overflow", "decode_error"}

const (
	failImageFull = iota
	failOverflow
	failDecodeError
)

// CUPTI calls timed on the decode path, in the order of devAgg.cuptiCalls.
var cuptiCalls = [...]string{"decode", "sample_info", "evaluate", "reset", "session"}
