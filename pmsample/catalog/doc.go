// Package catalog is what a chip can sample, read from CUPTI's Profiler Host API: its metric
// catalog (List, Describe), the planning of requested Perfworks metrics into single-pass
// groups (Planner), the curated default set resolved per chip (DefaultSet), what the project
// knows of each chip beyond its catalog (Chips), and the chip captures the fake libcupti
// replays (capture.go). The sampler (package pmsample) plans through it; the CLI's `metrics
// list/describe/plan/chips` open it with Open.
//
//   - planner.go: requested Perfworks metrics (priority order) to single-pass groups. Unknown
//     names fail with the nearest valid names; a metric that alone needs more than one pass
//     (sm__throughput.avg.pct_of_peak_sustained_elapsed needs 19 on GH100) fails with
//     single-pass metrics of the same hardware unit. Metrics are packed greedily, first fit,
//     asking GetNumOfPasses. A named single-pass set (CUPTI 13.2) is one group.
//   - defaults.go: the curated, DCGM-comparable metrics of mapping.Curated() resolved per chip:
//     in priority order, each takes the first of its candidate Perfworks names that the chip's
//     catalog has and that keeps one pass with those before it; the others are left out with
//     their reason (docs/supported-gpus.md has every chip's result).
//   - catalog.go: Open(lib, "0" or "GH100") with List, Describe, Plan and DefaultSet.
//   - chips.go: architecture, products and PM sampling trigger of the chips CUPTI lists.
//   - capture.go: a chip's catalog and pass counts written for the fake libcupti.
package catalog
