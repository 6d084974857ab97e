package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/kubepods"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// observeProcesses hands the attribution join what the health source saw of each GPU's
// compute processes (NVML's list and per-process SM shares), so that processes that load
// no injection library get their own part of the device counters (docs/attribution.md,
// "Untraced processes"). It runs on the health goroutine.
func observeProcesses(a *attribution.Attributor) func(health.Processes) {
	return func(p health.Processes) {
		o := attribution.ProcessObservation{GPU: p.GPU, UUID: p.UUID, Start: p.Start, End: p.End, Shares: p.Shares, MIG: p.MIG,
			Processes: make([]attribution.ObservedProcess, len(p.Procs))}
		for i, q := range p.Procs {
			o.Processes[i] = attribution.ObservedProcess{PID: q.PID, SMShare: q.SMShare, Namespace: q.Namespace, Pod: q.Pod, Container: q.Container, MPS: q.MPS}
		}
		a.ObserveProcesses(o)
	}
}

// recordedProcesses is p as a recording's processes frame (NaN shares become unknown).
func recordedProcesses(p health.Processes) recording.ProcessesEvent {
	e := recording.ProcessesEvent{GPU: p.GPU, UUID: p.UUID, Start: uint64(p.Start.UnixNano()), End: uint64(p.End.UnixNano()),
		Shares: p.Shares, MIG: p.MIG, Processes: make([]recording.ObservedProcess, len(p.Procs))}
	for i, q := range p.Procs {
		e.Processes[i] = recording.ObservedProcess{PID: q.PID, Namespace: q.Namespace, Pod: q.Pod, Container: q.Container, MPS: q.MPS}
		if !math.IsNaN(q.SMShare) {
			s := q.SMShare
			e.Processes[i].SMShare = &s
		}
	}
	return e
}

// replayedProcesses is a recorded processes frame as the health source reported it.
func replayedProcesses(e recording.ProcessesEvent) health.Processes {
	p := health.Processes{GPU: e.GPU, UUID: e.UUID, Start: time.Unix(0, int64(e.Start)), End: time.Unix(0, int64(e.End)),
		Shares: e.Shares, MIG: e.MIG, Procs: make([]health.Process, len(e.Processes))}
	for i, q := range e.Processes {
		p.Procs[i] = health.Process{PID: q.PID, SMShare: math.NaN(), Namespace: q.Namespace, Pod: q.Pod, Container: q.Container, MPS: q.MPS}
		if q.SMShare != nil {
			p.Procs[i].SMShare = *q.SMShare
		}
	}
	return p
}

// maxCgroupBytes bounds the read of /proc/<pid>/cgroup (a few hundred bytes in practice).
const maxCgroupBytes = 64 << 10

// pidPodResolver resolves a PID NVML reports to its pod the way traced processes are
// resolved (the cgroup, then the informer's cache), reading the cgroup from procRoot
// (/proc: the exporter must see the host's PIDs, hostPID in Kubernetes). It does no network
// I/O; a PID that is gone or unreadable has no pod.
func pidPodResolver(r *kubepods.Resolver, procRoot string) func(pid uint32) (pod, namespace, container string, ok bool) {
	return func(pid uint32) (string, string, string, bool) {
		f, err := os.Open(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
		if err != nil {
			return "", "", "", false
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxCgroupBytes))
		if err != nil {
			return "", "", "", false
		}
		c, res := r.Lookup(string(b))
		if res != kubepods.Found {
			return "", "", "", false
		}
		return c.Pod, c.Namespace, c.Name, true
	}
}
