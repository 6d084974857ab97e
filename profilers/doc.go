// Package profilers finds the processes on this host that want the GPUs' performance counters
// (Nsight Compute, Nsight Systems sampling GPU metrics, DCGM's profiling module, processes the
// user names) and gives them the counters: pmsample lets its session go (GiveWay) while such a
// process lives and takes the counters back when the last one is gone (TakeBack).
//
// Why it watches processes: one PM session per GPU exists host-wide, and a profiler that asks
// while the exporter samples is refused (ncu exits 9, "a driver resource was unavailable"),
// while the exporter learns nothing. So the exporter must let go before the profiler asks:
// Nsight Compute's front end starts before its target and lives until the target's last
// kernel, so seeing it is early enough (docs/pm-sampling.md "Sharing the counters" has the
// timings measured on the GPU).
//
// When: where the kernel's exec records can be read (package execevents: perf events, which
// need CAP_PERFMON or CAP_SYS_ADMIN for the whole host), Watcher looks at a process the moment
// it execs, and otherwise once a second; every poll only while a profiler runs, to see it end.
// Elsewhere it looks every poll (100 ms by default). The wake-ups were what the watch cost on a
// quiet host (docs/performance.md, "The give-way watch woken by execs"), and at an exec it finds
// a profiler within milliseconds, not within a poll. The netlink process connector would tell of
// every exec too, but it answers only in the host's network namespace (hostNetwork), which the
// chart does not use.
//
// How it looks: Watcher reads /proc/loadavg, whose last field is the newest PID the kernel
// handed out. PIDs are handed out in increasing order (wrapping at pid_max), so the processes
// new since the last look are the PIDs between its two readings: a few (up to 32) are read one
// by one, /proc/PID/stat, skipping threads (which take PIDs from the same counter); more, or a
// wrap, list /proc and read the PIDs in that range. A busy node hands out PIDs at every poll,
// and listing all of /proc each time cost it in proportion to its processes. The name, and the
// command line or environment where a rule needs them, tell a profiler. Processes younger than
// a second are read again, since a fork shows the parent's name until it execs (with exec
// records, an exec is read when it is reported, however late); only those and the processes
// whose mappings a rule reads are kept. The rules are a table (rules.go).
//
// Limits: the host's processes are visible only with the host's PID namespace (the chart's
// hostPID), and /proc/loadavg counts the PIDs of the reader's namespace: /proc must be that
// namespace's; the environment and the mapped libraries of another user's process need
// CAP_SYS_PTRACE (without it the rules that need them do not match: Nsight Compute is still
// seen by its front end's name); a PM-sampling client that is not in the table and not named
// (WithNames) is not seen before it asks, and pmsample then reports busy and takes the counters
// back within its busy poll once they free.
package profilers
