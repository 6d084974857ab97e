// Package gpmsource serves the curated device metrics (cupti_sm_active_ratio, ...) from NVML
// GPM (GPU Performance Monitoring, Hopper and newer), a hardware unit apart from the PM
// counters that CUPTI PM sampling reads: while PM sampling cannot read a GPU (a profiler holds
// its counters, it is paused, it lacks the privilege, its session is released for idleness)
// the same families keep flowing from GPM at 10 Hz, labelled source="gpm" (Fill); with
// gpm.mode=only they come from GPM alone, with no PM session (the low-cost mode). On a GPU in
// MIG mode it also serves each GPU instance's metrics (cupti_mig_*). It finds the processes
// that hold a busy GPU's PM counters (Holders). docs/pm-sampling.md "GPM" says what GPM gives
// and what it does not.
package gpmsource
