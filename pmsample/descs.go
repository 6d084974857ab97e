package pmsample

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// descs are the self-metric families of PM sampling: the aggregator's (selfmetrics.go), idle
// release's (release.go) and give-way's (giveway.go).
var descs = snapshot.NewTable()

// Descs lists the self-metric families PM sampling can emit, for the metrics reference and
// name checks: a recording does not exercise them all (cupti_pm_sampling_state needs a live
// sampler, cupti_pm_observed_ratio multiplexing, the idle and give-way families a live
// sampler with those turned on).
func Descs() []*snapshot.Desc { return descs.Descs() }
