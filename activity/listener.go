package activity

import (
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// ProcessInfo is what the Aggregator resolved about a connected process: its pod (from
// the hello or the pod resolver) and the host GPU label of each of its CUDA ordinals.
type ProcessInfo struct {
	Pod, Namespace, Container string
	// PodPriority ranks the pod labels for the exporter's cardinality cap: verified when the
	// kernel's cgroup named the pod, claimed when only a hello did.
	PodPriority snapshot.Priority
	// GPUs is the host GPU label ("0", "1", ... as PM series carry it) by CUDA ordinal in
	// the process; an ordinal the resolver does not know keeps the ordinal itself.
	GPUs []string
	// UUIDs is the device UUID by CUDA ordinal, as the hello gave it ("" if unknown).
	UUIDs []string
}

// Listener receives what traced processes send, after the Aggregator has taken it: a
// downstream consumer (the attribution join) reads the same stream without reaching into
// the Aggregator. Methods are called on the connection's goroutine (one per process, so
// calls for different processes are concurrent) and must not block for long; slices are
// reused after a call returns: copy what you keep. ProcessConnected is called again for
// the same process when its pod labels change after it connected (a pod resolver that
// answered PodPending at first, see WithPodResolver): the later info replaces the earlier.
type Listener interface {
	ProcessConnected(p *record.Process, info ProcessInfo)
	Records(p *record.Process, recs []record.Record)
	Coverage(p *record.Process, spans []record.Interval)
	ProcessDisconnected(p *record.Process)
}

// WithListener forwards connections, records and coverage to l after aggregating them.
func WithListener(l Listener) Option {
	return func(c *config) { c.listeners = append(c.listeners, l) }
}

// Coverage takes the spans a process reports it traced. The Aggregator counts the traced
// and lossy seconds and forwards the spans to its listeners.
func (a *Aggregator) Coverage(p *record.Process, spans []record.Interval) {
	var traced, lossy float64
	for _, s := range spans {
		if s.End <= s.Start {
			continue
		}
		d := float64(s.End-s.Start) / 1e9
		if s.Lossy {
			lossy += d
		} else {
			traced += d
		}
	}
	a.mu.Lock()
	a.tracedSeconds += traced
	a.lossySeconds += lossy
	a.mu.Unlock()
	a.splitCoverage(p, spans, false)
	a.gen.Add(1)
	for _, l := range a.cfg.listeners {
		l.Coverage(p, spans)
	}
}

// LaunchListener is a Listener that also wants launch hints: a process that had been quiet
// submitted GPU work (a kernel or graph launch, a copy, a memset) at CUPTI time at, seen by
// its injected library before the GPU ran it (wire version 3). The idle controller takes an
// idle-released GPU's PM session back on it.
type LaunchListener interface {
	Launched(p *record.Process, at uint64)
}

// Launched forwards a launch hint of p to the listeners that take them (LaunchListener).
func (a *Aggregator) Launched(p *record.Process, at uint64) {
	for _, l := range a.cfg.listeners {
		if ll, ok := l.(LaunchListener); ok {
			ll.Launched(p, at)
		}
	}
}

// KernelLabel returns the kernel label the kernel histograms use now for a mangled kernel
// name: its short name while it is in the top K, "other" otherwise. Consumers that label
// by kernel (attribution) call it so that both share one bounded label set.
func (a *Aggregator) KernelLabel(mangled string) string {
	short := a.names.name(mangled).short
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.kernels.rank(mangled, short)
	if !r.top {
		return otherKernel
	}
	return r.name
}

// processInfo is the listener view of a process state.
func (ps *procState) info(p *record.Process) ProcessInfo {
	in := ProcessInfo{Pod: ps.pod.pod, Namespace: ps.pod.namespace, Container: ps.pod.container, PodPriority: ps.pod.prio,
		GPUs: make([]string, len(ps.devs)), UUIDs: make([]string, len(ps.devs))}
	for i, d := range ps.devs {
		in.GPUs[i], in.UUIDs[i] = d.gpu, d.uuid
	}
	return in
}
