// Package execevents tells the profiler watcher at once when a process execs on the host, so
// that it need not wake every poll while nothing starts.
//
// How: one perf event per online CPU (a software "dummy" event, which counts nothing) carries
// the kernel's side-band COMM records with comm_exec: one at each exec on that CPU, with the
// process's PID. Each CPU's records land in a small ring buffer shared with the kernel, which
// wakes the reader at each record (a one-byte watermark); the CPUs' events are one epoll set,
// read through the Go runtime's poller, so the reader sleeps without a thread or a timer.
// Between two reads the CPUs are out of that set: in it, every record of a host that execs all
// the time woke the runtime's poller while the reader paused.
//
// Why perf events: the netlink process connector sends its events only into the host's network
// namespace (the chart does not use hostNetwork), and inotify does not work on /proc. Opening
// perf events for the whole host needs CAP_PERFMON or CAP_SYS_ADMIN (the chart grants the
// latter for the GPU counters) where kernel.perf_event_paranoid is above 0, and a seccomp
// profile that allows perf_event_open (containerd's RuntimeDefault does for a container with
// CAP_SYS_ADMIN). Where Open fails the watcher polls as before (docs/pm-sampling.md, "Sharing
// the counters").
//
// Memory: five pages a CPU (the header and the ring) of kernel memory locked for the mapping,
// counted against kernel.perf_event_mlock_kb (516 KiB a CPU by default, shared by root's perf
// users); past it Open fails and the caller polls.
//
// Limits: a CPU brought online after Open is not watched (the watcher's one-second look
// covers it); a record the kernel could not write (a full ring) is counted as lost, and the
// caller then reads every process started since its last look.
package execevents
