package pmsample

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// descs are the self-metric families the sampler itself emits: idle release's (release.go) and
// give-way's (giveway.go). The aggregator's are package aggregate's.
var descs = snapshot.NewTable()

// Descs lists the self-metric families the sampler can emit, for the metrics reference and
// name checks: a recording exercises none of them (the idle and give-way families need a live
// sampler with those turned on).
func Descs() []*snapshot.Desc { return descs.Descs() }
