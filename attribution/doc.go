// Package attribution joins each GPU's PM samples (pmsample) with the kernel records of the
// traced processes on it (activity) and says who used the device: every sample's counters
// are split over the kernels that overlap it, so DRAM, PCIe and NVLink bytes and the active
// seconds of SM, tensor and FP pipes get a kernel label and a pod.
//
// # Pipeline
//
// An [Attributor] is both an activity.Listener (registered with activity.WithListener: it
// sees every connection, kernel/memcpy/memset record and traced-time span after the activity
// Aggregator) and the second sink of the PM source (Add, called beside the PM
// Aggregator's Add). It publishes an immutable snapshot.Snapshot (Snapshot waits at most 100 ms for a join), so
// the exporter serves it as one more source ("attribution"). Data flows one way: it reads
// what pmsample and activity deliver and reaches into neither.
//
// # The join
//
// Per device, PM samples are held until they end more than the watermark (default 3 s)
// before the device's newest sample: the activity library flushes about once a second, so by
// then the records that overlap them have arrived. A device that gets no batch for a
// watermark of wall time is released at once. A released chunk of samples meets every record
// that overlaps it, joined in parts of about 100 ms (joinSpan) whatever the decode period:
//
//   - a sample's time is split over the records overlapping it by overlap, concurrent records
//     sharing the overlap (weight = integral of 1/records-running over the record's span);
//   - time no record covers goes to kernel="(idle)" if every process known on the device
//     traced that time (its non-lossy coverage spans), else to "(untraced)"; a process that
//     sends no spans (an old library) counts as untraced while connected; a device with no
//     known process is idle;
//   - processes NVML shows on the GPU that trace nothing (ObserveProcesses, fed from the
//     health source by the binary: PIDs, pods and per-process SM shares per period) get
//     classes of their own: the part of the traced records' time and of the gaps that
//     their shares say they ran moves to them (processes.go), so the rate fit splits a
//     sample between a traced kernel and an untraced process; their parts are labelled
//     kernel="(untraced)" and, per pod, source="nvml";
//   - where PM sampling counts the GPU's context switches, each time-sliced sample goes to the
//     context whose turn it was (turns.go: an HMM over the segments between switches, the
//     record edges and the learned rotation), traced or untraced; the MPS server's clients
//     are one context (the server never a workload), split among themselves by rate; a MIG
//     GPU is not split by process;
//   - each metric's value (bytes for counters; active seconds = ratio x sample time for
//     ratios) is split over those parts by the estimator: "overlap" (by weight) or "rate"
//     (by exposure x the class's estimated rate, a class being a kernel name of one process,
//     fitted by EM over the chunk and carried over with decay; see docs/attribution.md for
//     the bias it removes); how much of the split rested on an estimate is served too
//     (cupti_attribution_uncertain_ratio, cupti_pod_uncertain_seconds_total).
//
// The shares of a sample sum to one, so for every metric and device the attributed parts
// (kernels, other, (idle), (untraced)) add up to the device total of the samples attributed,
// to float rounding: conservation, checked by a property test on random timelines.
//
// Records that arrive after (part of) their time was attributed are late: counted, and only
// their part after the frontier is joined. Pending records are capped per device; malformed
// or foreign input (end < start, another clock, unknown devices or processes, coverage spans
// out of order) is counted and logged at most once a minute per kind, never fatal.
//
// # Concurrency and cost
//
// One mutex guards the state; the join of a chunk runs inside Add, so a listener call
// may wait for it (about 20 ms of CPU per second of samples at 1 kHz and 200k kernels/s,
// see BenchmarkJoin). Records are stored compactly (two int64 and two int32) in time buckets,
// so a release touches only the records it takes.
package attribution
