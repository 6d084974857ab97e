// Package aggregate folds the batches a PM source delivers (the sampler of package pmsample, a
// replayed recording, the GPM source) into metric snapshots. It consumes pmdata.Batches and
// reads the sampler's device states only through WithStatus, so it imports nothing of the
// sampler.
//
// The Aggregator consumes Batches from any pmdata.Source. Counters become monotonic totals
// (sum of value x scale); gauges become the time-weighted mean (weight = sample duration), max
// and min over a window (default 10 s, one batch granularity, in sample time; package window),
// published as the Desc, Max and Min families that mapping names. Snapshots are immutable and
// swapped atomically; Snapshot never blocks. Gauges of a device that delivered nothing for a
// whole window are left out; counters stay.
//
// # Self-metrics
//
// Per device (labels gpu, uuid, model, chip, pci_bus_id): cupti_pm_samples_total,
// cupti_pm_samples_lost_total{reason} and cupti_pm_lost_seconds_total{reason} (reasons in
// pmdata.LostReasons; samples_total + samples_lost_total grow at the configured rate, except while
// idle-released),
// cupti_pm_samples_dropped_total{reason="first_sample|invalid|incomplete|out_of_range"} (decoded, not
// delivered), cupti_pm_samples_out_of_range_total{metric} (the guard's rejections),
// cupti_pm_decode_failures_total{reason="image_full|overflow|decode_error"} (decodes),
// cupti_pm_overflows_total, cupti_pm_window_coverage_ratio (share of the window the
// statistics cover), cupti_pm_sampling_interval_seconds (in effect),
// cupti_pm_decode_duration_seconds (last decode), cupti_pm_decode_gap_seconds (histogram of the
// time between a session's decodes), cupti_pm_cupti_call_seconds_total{call},
// cupti_pm_decode_thread_cpu_seconds_total, cupti_pm_sampling_state{state} (with WithStatus;
// states sampling, paused, busy, error, idle-released, yielded),
// cupti_pm_observed_ratio{metric} for multiplexed metrics, and
// cupti_pm_last_sample_timestamp_seconds. What an idle GPU does without by default
// (docs/sizing.md "An idle GPU"): a reason's series appears at its first event and
// cupti_pm_sampling_state has the current state's series only (WithZeroReasons: all, at 0),
// the Min families are left out (WithWindowMin), and so are the decode path's timings and the
// last sample time (WithTiming).
//
// # Concurrency
//
// Add is safe from several goroutines (a source calls it from one goroutine per device);
// Snapshot may be called at any time.
package aggregate
