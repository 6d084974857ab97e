package pmsample

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// SelfDescs lists the self-metric families the aggregator can emit, for the metrics
// reference and name checks: a recording does not exercise them all (cupti_pm_sampling_state
// needs a live sampler, cupti_pm_observed_ratio multiplexing).
func SelfDescs() []*snapshot.Desc {
	return []*snapshot.Desc{samplesDesc, droppedDesc, outOfRangeDesc, decodeFailuresDesc, lostSamplesDesc, lostSecondsDesc, coverageDesc,
		intervalDesc, overflowsDesc, decodeDesc, decodeGapDesc, cuptiCallDesc, threadCPUDesc, stateDesc, observedDesc, lastSampleDesc}
}
