package pmsample

import "github.com/cupti-exporter/cupti-exporter/mapping"

// Self-metrics of PM sampling: one series per device (and reason, state or metric).
var (
	samplesDesc = &mapping.Desc{
		Name: "cupti_pm_samples_total", Help: "PM samples evaluated and aggregated.",
		Kind: mapping.KindCounter, OTelName: "cupti.pm.samples", OTelUnit: "{sample}",
		LabelNames: mapping.DeviceLabelNames,
	}
	droppedDesc = &mapping.Desc{
		Name: "cupti_pm_samples_dropped_total", Help: "PM samples (or decodes, for image_full and decode_error) lost, by reason.",
		Kind: mapping.KindCounter, OTelName: "cupti.pm.samples.dropped", OTelUnit: "{sample}",
		LabelNames: withLabels("reason"),
	}
	overflowsDesc = &mapping.Desc{
		Name: "cupti_pm_overflows_total", Help: "Hardware buffer overflows; each recreated the sampling session.",
		Kind: mapping.KindCounter, OTelName: "cupti.pm.overflows", OTelUnit: "{overflow}",
		LabelNames: mapping.DeviceLabelNames,
	}
	decodeDesc = &mapping.Desc{
		Name: "cupti_pm_decode_duration_seconds", Help: "Time the last decode and evaluation of the hardware buffer took.",
		Kind: mapping.KindGauge, Unit: "seconds", OTelName: "cupti.pm.decode.duration", OTelUnit: "s",
		LabelNames: mapping.DeviceLabelNames,
	}
	cuptiCallDesc = &mapping.Desc{
		Name: "cupti_pm_cupti_call_seconds_total", Help: "Time spent inside CUPTI calls of the decode path (decode, sample_info, evaluate, reset).",
		Kind: mapping.KindCounter, Unit: "seconds", OTelName: "cupti.pm.cupti_call.duration", OTelUnit: "s",
		LabelNames: withLabels("call"),
	}
	stateDesc = &mapping.Desc{
		Name: "cupti_pm_sampling_state", Help: "1 for the current PM sampling state of the device (sampling, paused, busy, error, idle-released).",
		Kind: mapping.KindGauge, OTelName: "cupti.pm.sampling.state", OTelUnit: "1",
		LabelNames: withLabels("state"),
	}
	observedDesc = &mapping.Desc{
		Name: "cupti_pm_observed_ratio", Help: "Fraction of the window during which a multiplexed metric was on the counters.",
		Kind: mapping.KindGauge, Unit: "ratio", OTelName: "cupti.pm.observed", OTelUnit: "1",
		LabelNames: withLabels("metric"),
	}
	lastSampleDesc = &mapping.Desc{
		Name: "cupti_pm_last_sample_timestamp_seconds", Help: "End of the newest PM sample, Unix time.",
		Kind: mapping.KindGauge, Unit: "seconds", OTelName: "cupti.pm.last_sample.timestamp", OTelUnit: "s",
		LabelNames: mapping.DeviceLabelNames,
	}
)

// Drop reasons, in the order of devAgg.dropped.
var dropReasons = [...]string{"first_sample", "invalid", "image_full", "overflow", "decode_error"}

const (
	dropFirst = iota
	dropInvalid
	dropImageFull
	dropOverflow
	dropDecodeError
)

// CUPTI calls timed on the decode path, in the order of devAgg.cuptiCalls.
var cuptiCalls = [...]string{"decode", "sample_info", "evaluate", "reset"}

// States a device can be in; every one is reported, 1 for the current.
var states = [...]State{StateSampling, StatePaused, StateBusy, StateError, StateIdle}

func withLabels(extra ...string) []string {
	return append(append([]string(nil), mapping.DeviceLabelNames...), extra...)
}
