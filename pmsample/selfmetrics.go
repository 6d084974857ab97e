package pmsample

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// Self-metrics of PM sampling: one series per device (and reason, state or metric).
var (
	samplesDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_samples_total", Help: "PM samples evaluated and aggregated.",
		Kind: snapshot.KindCounter, OTelName: "cupti.pm.samples", OTelUnit: "{sample}",
		LabelNames: snapshot.DeviceLabelNames,
	})
	droppedDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_samples_dropped_total", Help: "PM samples decoded but not delivered: first_sample (began before Start), invalid (no valid span or value), incomplete (records split by a counter data image re-initialisation), out_of_range (a value or span the hardware cannot produce; cupti_pm_samples_out_of_range_total says which).",
		Kind: snapshot.KindCounter, OTelName: "cupti.pm.samples.dropped", OTelUnit: "{sample}",
		LabelNames: snapshot.DeviceLabels("reason"),
	})
	outOfRangeDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_samples_out_of_range_total", Help: "PM samples rejected because a value or the span was outside what the hardware can produce, by the first check that failed: the Perfworks metric, or span.",
		Kind: snapshot.KindCounter, OTelName: "cupti.pm.samples.out_of_range", OTelUnit: "{sample}",
		LabelNames: snapshot.DeviceLabels("metric"),
	})
	decodeFailuresDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_decode_failures_total", Help: "Decodes that lost data: image_full (COUNTER_DATA_FULL), overflow (hardware buffer), decode_error (the call failed). Counts decodes; cupti_pm_samples_lost_total counts the samples.",
		Kind: snapshot.KindCounter, OTelName: "cupti.pm.decode.failures", OTelUnit: "{decode}",
		LabelNames: snapshot.DeviceLabels("reason"),
	})
	lostSamplesDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_samples_lost_total", Help: "PM samples the hardware interval implies for time without a delivered sample, by cause; samples_total + samples_lost_total grow at the configured rate.",
		Kind: snapshot.KindCounter, OTelName: "cupti.pm.samples.lost", OTelUnit: "{sample}",
		LabelNames: snapshot.DeviceLabels("reason"),
	})
	lostSecondsDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_lost_seconds_total", Help: "Time without a delivered PM sample, by cause.",
		Kind: snapshot.KindCounter, Unit: "seconds", OTelName: "cupti.pm.lost.duration", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabels("reason"),
	})
	coverageDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_window_coverage_ratio", Help: "Share of the statistics window covered by delivered samples (the rest was lost); the window mean, max and min describe only the covered part.",
		Kind: snapshot.KindGauge, Unit: "ratio", OTelName: "cupti.pm.window.coverage", OTelUnit: "1",
		LabelNames: snapshot.DeviceLabelNames,
	})
	intervalDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_sampling_interval_seconds", Help: "Hardware sampling interval in effect (longer than configured after an automatic backoff).",
		Kind: snapshot.KindGauge, Unit: "seconds", OTelName: "cupti.pm.sampling.interval", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabelNames,
	})
	overflowsDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_overflows_total", Help: "Hardware buffer overflows; each recreated the sampling session.",
		Kind: snapshot.KindCounter, OTelName: "cupti.pm.overflows", OTelUnit: "{overflow}",
		LabelNames: snapshot.DeviceLabelNames,
	})
	decodeDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_decode_duration_seconds", Help: "Time the last decode and evaluation of the hardware buffer took.",
		Kind: snapshot.KindGauge, Unit: "seconds", OTelName: "cupti.pm.decode.duration", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabelNames,
	})
	decodeGapDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_decode_gap_seconds", Help: "Time between consecutive decodes of a session: past the decode period by more than the counter data image's room for a late decode (100 ms of samples, at most 250 slots, at first), samples are lost to a full image.",
		Kind: snapshot.KindHistogram, Unit: "seconds", OTelName: "cupti.pm.decode.gap", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabelNames,
	})
	cuptiCallDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_cupti_call_seconds_total", Help: "Time spent inside CUPTI calls of the decode path (decode, sample_info, evaluate, reset).",
		Kind: snapshot.KindCounter, Unit: "seconds", OTelName: "cupti.pm.cupti_call.duration", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabels("call"),
	})
	threadCPUDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_decode_thread_cpu_seconds_total", Help: "CPU time of the device's decode thread (CUPTI calls plus the exporter's own work on it); compare with cupti_pm_cupti_call_seconds_total and process_cpu_seconds_total.",
		Kind: snapshot.KindCounter, Unit: "seconds", OTelName: "cupti.pm.decode_thread.cpu", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabelNames,
	})
	stateDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_sampling_state", Help: "1 for the current PM sampling state of the device (sampling, paused, busy, error, idle-released, yielded: given to a profiler found on the host).",
		Kind: snapshot.KindGauge, OTelName: "cupti.pm.sampling.state", OTelUnit: "1",
		LabelNames: snapshot.DeviceLabels("state"),
	})
	observedDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_observed_ratio", Help: "Fraction of the window during which a multiplexed metric was on the counters.",
		Kind: snapshot.KindGauge, Unit: "ratio", OTelName: "cupti.pm.observed", OTelUnit: "1",
		LabelNames: snapshot.DeviceLabels("metric"),
	})
	lastSampleDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_pm_last_sample_timestamp_seconds", Help: "End of the newest PM sample, Unix time.",
		Kind: snapshot.KindGauge, Unit: "seconds", OTelName: "cupti.pm.last_sample.timestamp", OTelUnit: "s",
		LabelNames: snapshot.DeviceLabelNames,
	})
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

// States a device can be in; every one is reported, 1 for the current.
var states = [...]State{StateSampling, StatePaused, StateBusy, StateError, StateIdle, StateYielded}
