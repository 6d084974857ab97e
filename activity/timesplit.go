package activity

import (
	"cmp"
	"slices"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// The per-pod time split: where each traced process's time on each GPU went. Within every
// complete coverage span a process reports (time it traced: its records there are all it
// ran), the span is cut into what the GPU ran for the process at each instant:
//
//   - compute: compute kernels, and no collective;
//   - communication: collective-communication kernels only (collective.go; also peer-to-peer
//     copies). In a synchronous job this is mostly time spent waiting for the other ranks;
//   - overlap: both at once (communication hidden behind compute);
//   - copy: copies or fills only;
//   - idle: none of the process's work (the GPU may run other processes').
//
// The states add up to the span, so their rates add up to the traced share of wall time.
// A process counts on a GPU once it has run a record there (a process sees every GPU of
// its container, and uses few). Lossy spans (records were lost) are not split. The span a
// process sent last waits for the next one (or for its disconnect): a kernel still running
// when the span was cut arrives with a later batch.

const (
	stateCompute = iota
	stateCommunication
	stateOverlap
	stateCopy
	stateIdle
	numSplitStates
)

var splitStates = [numSplitStates]string{"compute", "communication", "overlap", "copy", "idle"}

var (
	podTimeDesc = descs.Counter("cupti_pod_time_seconds_total", "seconds", "cupti.pod.time", "s", "Traced time of each pod's processes on each GPU, by what the GPU ran for them: compute kernels (compute), "+
		"collective-communication kernels only (communication: NCCL and the libraries of docs/training.md; in a synchronous job "+
		"mostly waiting for the other ranks), both at once (overlap), copies only (copy), nothing (idle). The states add up to "+
		"the complete coverage spans from the process's first record on the GPU.", "gpu", "uuid", "namespace", "pod", "container", "state")
	splitDroppedDesc = descs.Counter("cupti_activity_split_dropped_records_total", "", "cupti.activity.split.records.dropped", "{record}", "Activity records left out of cupti_pod_time_seconds_total, by reason: late (their time was already split), "+
		"pending_full (a process held more records than the split keeps between two coverage spans), memory_budget, "+
		"no_coverage (a process that has sent no coverage span yet: a library older than wire version 2, or a busy start).", "reason")
)

// Reasons of cupti_activity_split_dropped_records_total.
const (
	splitLate         = "late"
	splitPendingFull  = "pending_full"
	splitMemoryBudget = "memory_budget"
	splitNoCoverage   = "no_coverage"
)

var splitDropReasons = []string{splitLate, splitPendingFull, splitMemoryBudget, splitNoCoverage}

// Bounds of what a process's timeline holds between the spans that split it: records of about
// two flush periods (1 s each by default), or of a traced window with a duty cycle, are usual;
// 512 Ki records take 12 to 24 MiB. Until its first span a process keeps at most 64 Ki (3 MiB): a
// library that sends none (wire version 1) must not hold memory for ever. Records are charged
// to the activity memory budget in blocks of 256, at 48 bytes each: 24 for the record, as
// much for the spare capacity of its slice. The first block (12 KiB) rides on the charge every
// connection pays for its state (the receiver's connBaseBytes, 96 KiB).
const (
	maxSplitPending   = 1 << 19
	maxSplitUncovered = 1 << 16
	splitBlock        = 256
	splitRecordBytes  = 48
)

// splitRec is one record as the split keeps it.
type splitRec struct {
	start, end uint64
	ord        uint32
	class      workClass
}

// timeline is what one process's split holds: its records not yet split and its coverage
// spans, the newest of which waits for the next. The Aggregator's lock guards it, but for the
// records a split has taken out (splitting).
type timeline struct {
	pending   []splitRec
	spans     []record.Interval
	used      []bool // by CUDA ordinal: the process ran a record there
	done      uint64 // split up to here
	held      int    // records pending or being split
	reserved  int    // records charged to the memory budget
	splitting bool   // a split runs outside the lock
	covered   bool   // a span arrived
	events    []splitEvent
}

// splitState is the Aggregator's part of the split: the drops.
type splitState struct {
	dropped [4]uint64 // by splitDropReasons
}

// observeSplitLocked adds record r of process ps to the process's timeline (kernel: the
// class of its name); a.mu is held.
func (a *Aggregator) observeSplitLocked(ps *procState, r *record.Record, kernel workClass) {
	if r.End <= r.Start {
		return
	}
	var class workClass
	switch r.Kind {
	case record.KindKernel:
		class = kernel
	case record.KindMemcpy:
		class = classCopy
		if r.CopyKind == copyPtoP {
			class = classComm
		}
	case record.KindMemset:
		class = classCopy
	default:
		return
	}
	tl := ps.tl
	if tl == nil {
		tl = &timeline{used: make([]bool, len(ps.devs)), reserved: splitBlock}
		ps.tl = tl
	}
	switch {
	case r.End <= tl.done:
		a.split.dropped[0]++
		return
	case tl.held >= maxSplitPending:
		a.split.dropped[1]++
		return
	case !tl.covered && tl.held >= maxSplitUncovered && !tl.splitting:
		// No span yet: forget what is held rather than keep it for a span that may never come.
		a.split.dropped[3] += uint64(len(tl.pending))
		tl.held -= len(tl.pending)
		tl.pending = tl.pending[:0]
	case tl.held >= tl.reserved:
		if !a.cfg.budget.Reserve(splitBlock * splitRecordBytes) {
			a.split.dropped[2]++
			return
		}
		tl.reserved += splitBlock
	}
	tl.used[r.Device] = true // deviceOf checked the ordinal
	tl.held++
	tl.pending = append(tl.pending, splitRec{r.Start, r.End, r.Device, class})
}

// splitCoverage takes spans process p reports it traced and splits every span before the
// newest; with final (the process is leaving) the newest too.
func (a *Aggregator) splitCoverage(p *record.Process, spans []record.Interval, final bool) {
	a.mu.Lock()
	ps := a.procs[p]
	if ps == nil || ps.tl == nil {
		a.mu.Unlock()
		return // no record yet: nothing of this process on any GPU
	}
	tl := ps.tl
	tl.covered = tl.covered || len(spans) > 0
	for _, s := range spans {
		if s.End > s.Start && s.End > tl.done {
			s.Start = max(s.Start, tl.done, lastEnd(tl.spans))
			if s.End > s.Start {
				tl.spans = append(tl.spans, s)
			}
		}
	}
	n := len(tl.spans)
	if !final {
		n--
	}
	if tl.splitting { // another call splits this process's spans (calls of one process are not concurrent in practice)
		a.mu.Unlock()
		return
	}
	if n <= 0 {
		if final {
			a.dropTimelineLocked(ps)
		}
		a.mu.Unlock()
		return
	}
	ready := slices.Clone(tl.spans[:n])
	tl.spans = slices.Delete(tl.spans, 0, n)
	recs := tl.pending
	tl.pending = nil
	tl.splitting = true
	tl.done = ready[n-1].End
	used := slices.Clone(tl.used)
	a.mu.Unlock()

	// Outside the lock: sort and sweep (the connection's goroutine pays, others go on).
	byOrd := splitSpans(recs, ready, used, &tl.events)
	keep := recs[:0]
	for _, r := range recs {
		if r.end > tl.done {
			keep = append(keep, r)
		}
	}

	a.mu.Lock()
	tl.splitting = false
	tl.held -= len(recs) - len(keep)
	tl.pending = append(keep, tl.pending...)
	if free := (tl.reserved - tl.held) / splitBlock; free > 1 {
		a.cfg.budget.Release(int64((free - 1) * splitBlock * splitRecordBytes))
		tl.reserved -= (free - 1) * splitBlock
	}
	if a.procs[p] == ps {
		now := a.cfg.now()
		for ord, secs := range byOrd {
			if !used[ord] {
				continue
			}
			dev := a.deviceOf(ps, uint32(ord))
			if dev == nil {
				continue
			}
			s := a.podSeriesOf(ps, uint32(ord), dev, now)
			for st, v := range secs {
				s.split[st] += v
			}
			s.hasSplit = true
		}
	}
	if final {
		a.dropTimelineLocked(ps)
	}
	a.mu.Unlock()
	a.gen.Add(1)
}

// dropTimelineLocked forgets process ps's timeline and gives its memory back.
func (a *Aggregator) dropTimelineLocked(ps *procState) {
	a.cfg.budget.Release(int64((ps.tl.reserved - splitBlock) * splitRecordBytes))
	ps.tl = nil
}

// finishSplit splits what process p's timeline still holds, before it disconnects: no
// record of its will come any more.
func (a *Aggregator) finishSplit(p *record.Process) { a.splitCoverage(p, nil, true) }

func lastEnd(spans []record.Interval) uint64 {
	if len(spans) == 0 {
		return 0
	}
	return spans[len(spans)-1].End
}

// splitEvent is a record's start (delta +1) or end (-1) in the sweep.
type splitEvent struct {
	t     uint64
	delta int32
	class workClass
}

// splitSpans cuts every complete span of spans into the split states, per CUDA ordinal in
// use, from the records recs (in any order; sorted here). The states of each ordinal add up
// to the spans' length.
func splitSpans(recs []splitRec, spans []record.Interval, used []bool, scratch *[]splitEvent) [][numSplitStates]float64 {
	out := make([][numSplitStates]float64, len(used))
	slices.SortFunc(recs, func(x, y splitRec) int {
		return cmp.Or(cmp.Compare(x.ord, y.ord), cmp.Compare(x.start, y.start))
	})
	for ord, u := range used {
		if !u {
			continue
		}
		lo, _ := slices.BinarySearchFunc(recs, uint32(ord), func(r splitRec, o uint32) int { return cmp.Compare(r.ord, o) })
		hi, _ := slices.BinarySearchFunc(recs, uint32(ord)+1, func(r splitRec, o uint32) int { return cmp.Compare(r.ord, o) })
		for _, sp := range spans {
			if sp.Lossy {
				continue
			}
			sweep(recs[lo:hi], sp.Start, sp.End, &out[ord], scratch)
		}
	}
	return out
}

// sweep adds the split of [s, e) by the records recs (of one ordinal, sorted by start) to acc.
func sweep(recs []splitRec, s, e uint64, acc *[numSplitStates]float64, scratch *[]splitEvent) {
	ev := (*scratch)[:0]
	for _, r := range recs {
		if r.start >= e {
			break
		}
		a, b := max(r.start, s), min(r.end, e)
		if a < b {
			ev = append(ev, splitEvent{a, 1, r.class}, splitEvent{b, -1, r.class})
		}
	}
	slices.SortFunc(ev, func(x, y splitEvent) int { return cmp.Compare(x.t, y.t) })
	*scratch = ev
	var n [numClasses]int32
	at := s
	var ns [numSplitStates]uint64
	for _, x := range ev {
		if x.t > at {
			ns[stateOf(n)] += x.t - at
			at = x.t
		}
		n[x.class] += x.delta
	}
	ns[stateIdle] += e - at
	for st, v := range ns {
		acc[st] += float64(v) / 1e9
	}
}

// stateOf is the split state while n[class] records of each class run.
func stateOf(n [numClasses]int32) int {
	switch {
	case n[classCompute] > 0 && n[classComm] > 0:
		return stateOverlap
	case n[classCompute] > 0:
		return stateCompute
	case n[classComm] > 0:
		return stateCommunication
	case n[classCopy] > 0:
		return stateCopy
	}
	return stateIdle
}

// splitFamilies appends cupti_pod_time_seconds_total (the pods and GPUs with a split) and the
// split's drops; a.mu is held.
func (a *Aggregator) splitFamilies(fs []snapshot.Family) []snapshot.Family {
	f := snapshot.Family{Desc: podTimeDesc}
	for k, s := range a.podSeries {
		if !s.hasSplit {
			continue
		}
		for st, name := range splitStates {
			f.Samples = append(f.Samples, snapshot.Sample{
				LabelValues: []string{k.dev.gpu, k.dev.uuid, k.pod.namespace, k.pod.pod, k.pod.container, name},
				Value:       s.split[st], Start: s.start, Priority: k.pod.prio,
			})
		}
	}
	d := snapshot.Family{Desc: splitDroppedDesc}
	for i, r := range splitDropReasons {
		d.Samples = append(d.Samples, a.counter(float64(a.split.dropped[i]), r))
	}
	return append(fs, sorted(f), d)
}
