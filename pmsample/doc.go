// Package pmsample samples GPU performance counters with CUPTI PM Sampling and delivers the
// samples as pmdata.Batches; package aggregate folds them into window statistics.
//
// # Pieces
//
//   - catalog/: what a chip can sample: the metric catalog, the planning of requested Perfworks
//     metrics into single-pass groups, the curated default set resolved per chip, the chip
//     facts and captures (package catalog). New plans once per chip through it.
//   - sampler.go, runner.go, session.go: one goroutine per device, locked to its OS thread, owning the
//     session: Enable, SetConfig, Start, a decode every 100 ms (default), Stop, Disable. The
//     hardware samples every 1 ms (GPU_TIME trigger; SYSCLK where the device refuses it) into a
//     64 MiB buffer (never less); the counter data image holds decode period x rate x 1.25 + 16
//     samples and its size is queried once. Samples that began before Start are dropped (the
//     first one spans from SetConfig); stop reasons 0 (OTHER) and 2 (END_OF_RECORDS) are success,
//     1 (COUNTER_DATA_FULL) loses the records that did not fit; CUPTI will not re-initialise
//     that image, so it is replaced by a fresh one in the same session. An overflow kills a
//     keep-oldest session: it is recreated (Disable, Enable, SetConfig, Start). With
//     WithMultiplex several groups take turns, each turn in a new session, each period.
//   - pipeline.go: WithPipeline(PipelineDouble) decodes into one of two images per group on the
//     device thread while an evaluator thread evaluates and resets the other (awaits its GPU check).
//   - guard/ (package guard): every decoded sample is checked against what the hardware can
//     produce (span, pct_of_peak within [0, 100], memory and link bytes under the chip's peak
//     rate) before any outlet; a replay is screened the same way. A decode that ends inside a
//     sample (populated > completed) splits it when the image is re-initialised: the next
//     image's sample 0 is then not evaluated (incomplete; docs/pm-sampling.md "Split samples").
//   - loss.go: each device's time line; every stretch without a delivered sample is a Loss with
//     a cause, counted in samples (stretch / interval) and seconds.
//   - admission.go: the cost per sample measured in the first second against the interval; an
//     unsustainable rate is logged and put in the device's status, or, with WithRateBackoff,
//     the interval is lengthened to a sustainable one.
//   - pause.go: Pause/Resume and the HTTP handler (POST /api/v1/pm-sampling/pause?duration=30s,
//     POST /api/v1/pm-sampling/resume) that release and retake the counters for ncu, nsys or DCGM.
//     HARDWARE_BUSY at SetConfig (a client the exporter does not know holds the counters) puts
//     the device in state busy and tries again every 500 ms for a minute, then every 5 s, while
//     the other devices keep sampling; INSUFFICIENT_PRIVILEGES is state error with the remedy,
//     retried every 5 min.
//   - giveway.go: GiveWay(device, holder) and TakeBack(device): package profilers gives a GPU's
//     counters to a profiler it found on the host (state yielded, not ready,
//     pmdata.DeviceStatus.Holder names it; lost with reason yielded;
//     cupti_pm_give_ways_total{tool}) and takes them back when it exits. WithCountersInUse keeps New from reading the counter availability while a
//     profiler runs (on an H100 reads made a running ncu fail).
//   - aggregate/ (package aggregate), window/ (package window): the consumer of the Batches,
//     from this sampler or any other pmdata.Source, that folds them into window statistics and
//     the self-metrics of PM sampling.
//
// # Idle release
//
// release.go: Release(device, reason) lets go of an idle GPU's session (state idle-released,
// ready; a user pause wins) and Reacquire(device, since) takes it back at once; package idle
// decides when. IdleProducer serves cupti_pm_idle_releases_total, _reacquires_total,
// _released_seconds_total and _missed_seconds_total; the missed span is also lost with reason
// idle_release, and released time is no loss.
//
// # Duty cycle
//
// WithDutyCycle holds the session for a share of every period and releases it (Stop, a last
// decode, Disable) for the rest: a held session costs a power-capped workload about 0.6 % of
// its throughput on an H200, a released one nothing. The released phases are lost with reason
// duty_cycle, so the window coverage reads about the share; the state stays sampling.
//
// # Default metrics
//
// Without WithMetrics the curated, DCGM-comparable metrics of mapping.Curated() are resolved per
// chip (catalog.Planner.PlanDefaults): in priority order, each takes the first of its candidate
// Perfworks names that the chip's catalog has and that keeps one pass with those before it; the
// others are logged with their reason and left out (catalog.Catalog.DefaultSet and `metrics
// chips` show the result, docs/supported-gpus.md every chip's). On GH100 (H200,
// CUPTI 13.0) nine make it: graphics engine, SM active, occupancy, tensor, DRAM, FP64 and FP32
// pipes, PCIe rx and tx; FP16 would need a second pass; NVLink is refused without NVLink peers
// (docs/pm-sampling.md has the table and the measurements).
//
// A device whose counters were busy at New is planned without the counter availability image;
// CUPTI then accepts metrics the device cannot collect and such a session yields no samples, so
// the device reads the image and plans again before its first session.
//
// # Concurrency
//
// Sampler.Run calls the sink from one goroutine per device (with the double pipeline, from
// that device's evaluator goroutine; still one at a time per device, in order). Pause, Resume
// and Status are safe at any time.
package pmsample
