// Package idle releases the PM sampling session of a GPU that sits idle and takes it back
// as soon as work starts: an idle H200 drew about 4 W more with a PM session on than with the
// exporter off (issue 13), and a fleet holds many idle GPUs.
//
// Data flow: a Controller reads NVML (go-nvml's nvml.Interface), PM batches (it is a sink
// beside the PM aggregator: Add) and activity records (it is an activity.Listener), and calls
// the sampler's Release and Reacquire (pmsample). It never calls CUPTI.
//
// A GPU is idle when, for the whole release delay (default 60 s), NVML utilisation was 0, no
// kernel, memcpy or memset record arrived for it, no traced process connected to it, and the SM
// active ratio of every PM batch (when the sampled metrics include
// sm__cycles_active...pct_of_peak_sustained_elapsed) stayed below 0.1 %. While sampling, the
// Controller checks every 500 ms (a multiple of every decode period). While released it polls
// every 20 ms (--pmsample.idle-poll) with cheap NVML calls per GPU: GPM SM utilisation since
// the last poll (Hopper and newer, --pmsample.idle-gpm: GPM needs no PM session, gpm.go), the
// instant power draw (a rise of --pmsample.idle-power-rise, 20 W, over the lowest reading since
// the release, power.go), clock-event reasons (the gpu_idle bit, once seen set, clears when
// work starts) and utilisation (above 0) every poll, compute processes every 100 ms (a new
// process appears at context creation, before its first kernel). A kernel record, a launch hint
// (activity.LaunchListener: the process's injected library saw it submit work after a quiet
// spell) or a process connecting to the activity socket wakes it at once. The first sign
// reacquires; the time from the last read that found nothing (the earliest the work may have
// begun, as far as that signal tells) to the first sample is counted by pmsample as missed
// (cupti_pm_idle_missed_seconds_total).
//
// Without NVML, or for a GPU NVML does not know by its UUID, nothing is released: a GPU is
// only let go while something cheap watches it. A user pause wins: pmsample keeps a paused
// device paused whatever the Controller calls.
//
// Run owns one goroutine; Add and the Listener methods may be called from any goroutine and
// never block on NVML.
package idle
