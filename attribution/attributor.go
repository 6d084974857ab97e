package attribution

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Attributor joins each device's PM samples with the kernel records of the traced processes
// on it and publishes the attributed totals as a snapshot. It implements activity.Listener;
// Add is the PM source's sink. All methods are safe for concurrent use; the join runs
// inside Add (and Flush) under the Attributor's lock, so a listener call may wait for
// one chunk's join (milliseconds). Snapshot waits for one at most snapshotWait (100 ms).
type Attributor struct {
	cfg    config
	logger *slog.Logger
	mapper *mapping.Mapper
	start  time.Time

	mu         sync.Mutex
	devs       map[int]*devState
	devOrder   []*devState
	devList    atomic.Pointer[[]*devState] // devOrder, for the gauges read without the lock
	byGPU      map[string]*devState
	byUUID     map[string]*devState
	props      map[string]pmdata.Properties
	metrics    []*metric
	metricIdx  map[string]int32
	families   map[string]*snapshot.Desc // derived families by name
	classes    classTable
	mem        memAccount
	folded     map[string]uint64 // kernel names joined as "other", by reason
	procs      map[*record.Process]*proc
	slots      []*proc // by proc.slot
	freeSlots  []int32
	dropped    map[string]uint64 // records, by reason
	badCov     map[string]uint64 // coverage spans, by reason
	droppedObs map[string]uint64 // NVML process observations, by reason
	logs       map[string]*logState
	lastMaint  time.Time
	dirty      atomic.Bool // changed since the last build
	snap       atomic.Pointer[snapshot.Snapshot]
}

// proc is what the join knows of one traced process.
type proc struct {
	slot      int32
	pid       uint32
	devs      []*devState // by CUDA ordinal; nil: a GPU the join does not sample
	pod       podKey
	podPrio   snapshot.Priority // how far its pod labels are verified (for the exporter's cap)
	presStart int64             // first time the process was known present (connect, first record or span)
	presEnd   int64             // math.MaxInt64 while connected
	goneAt    time.Time
	spans     []span // non-lossy traced spans, sorted and merged
	lastSpan  int64  // end of the latest span received, for the order check
	refs      int    // pending records that name this slot
}

type span struct{ start, end int64 }

// podKey is a pod's series on a device; source says whether its numbers come from its
// kernel records or are estimated from NVML (an untraced pod, or processes outside pods).
type podKey struct{ namespace, pod, container, source string }

// New returns an Attributor for the devices and catalog of a PM source. Metrics are named
// through m (the same mapper as the PM aggregator, so the families follow its rules).
func New(devices []pmdata.Device, catalog []pmdata.CatalogEntry, m *mapping.Mapper, logger *slog.Logger, opts ...Option) (*Attributor, error) {
	if m == nil {
		return nil, fmt.Errorf("attribution: no metric mapper")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := newConfig(opts)
	a := &Attributor{
		cfg: cfg, logger: logger.With("source", "attribution"), mapper: m, start: cfg.now(),
		devs: map[int]*devState{}, byGPU: map[string]*devState{}, byUUID: map[string]*devState{},
		props: map[string]pmdata.Properties{}, metricIdx: map[string]int32{}, families: map[string]*snapshot.Desc{},
		procs: map[*record.Process]*proc{}, dropped: map[string]uint64{}, badCov: map[string]uint64{}, droppedObs: map[string]uint64{},
		logs: map[string]*logState{}, folded: map[string]uint64{}, mem: memAccount{budget: cfg.budget},
	}
	a.classes.init()
	if err := a.checkFamilies(catalog); err != nil {
		return nil, err
	}
	for _, d := range devices {
		a.device(d.Index, d.UUID)
	}
	for _, e := range catalog {
		a.props[e.Name] = e.Properties
	}
	a.mu.Lock()
	a.build(a.cfg.now())
	a.mu.Unlock()
	return a, nil
}

// ParseEstimator checks an estimator name (from a flag).
func ParseEstimator(name string) error {
	for _, e := range Estimators {
		if e == name {
			return nil
		}
	}
	return fmt.Errorf("unknown attribution estimator %q: use one of %s", name, strings.Join(Estimators, ", "))
}

// device returns the state of a device index, creating it.
func (a *Attributor) device(index int, uuid string) *devState {
	if d := a.devs[index]; d != nil {
		return d
	}
	gpu := strconv.Itoa(index)
	d := &devState{gpu: gpu, uuid: uuid, labels: []string{gpu, uuid},
		kernels: map[string]*acc{}, pods: map[podKey]*acc{}, carried: map[rateKey]*classRate{}}
	a.devs[index] = d
	a.devOrder = append(a.devOrder, d)
	list := slices.Clone(a.devOrder)
	a.devList.Store(&list)
	a.byGPU[gpu] = d
	if uuid != "" {
		a.byUUID[strings.ToLower(uuid)] = d
	}
	return d
}

// metricIndex maps a Perfworks name once to its attributed families.
func (a *Attributor) metricIndex(name string) int32 {
	if i, ok := a.metricIdx[name]; ok {
		return i
	}
	i := int32(len(a.metrics))
	a.metricIdx[name] = i
	met := &metric{perfworks: name, ctxsw: isContextSwitchMetric(name), dramRead: hasPart(name, dramReadBase)}
	a.metrics = append(a.metrics, met)
	if met.ctxsw {
		return i
	}
	mm, err := a.mapper.Map(name, a.props[name])
	if err != nil || mm.Desc == nil {
		a.logger.Debug("metric not attributed: no mapping", "metric", name, "err", err)
		return i
	}
	kd, pd, q, ok := derived(mm)
	if !ok {
		a.logger.Debug("metric not attributed: a gauge with no sum over time", "metric", name, "family", mm.Desc.Name)
		return i
	}
	if kd, pd = a.family(kd), a.family(pd); kd == nil || pd == nil {
		a.logger.Warn("metric not attributed: its attributed family collides with another", "metric", name, "family", mm.Desc.Name)
		return i
	}
	met.ok, met.q, met.scale, met.kernel, met.pod = true, q, mm.Scale, kd, pd
	met.engine = q == quantitySeconds && isEngineActiveMetric(name)
	met.pipe = q == quantitySeconds && strings.HasSuffix(mm.Desc.Name, pipeActiveSuffix)
	met.serveKernel = a.cfg.kernelFams == nil || a.cfg.kernelFams[FamilyStem(kd.Name)]
	met.servePod = a.cfg.podFams == nil || a.cfg.podFams[FamilyStem(pd.Name)]
	for _, l := range mm.Labels {
		met.labels = append(met.labels, l.Value)
	}
	return i
}

// checkFamilies refuses a per-kernel or per-pod family stem that neither a metric of the
// catalog nor a curated metric makes (a typo would otherwise serve nothing, silently); a
// curated family this GPU lacks (NVLink on a GPU without peers) is accepted.
func (a *Attributor) checkFamilies(catalog []pmdata.CatalogEntry) error {
	if a.cfg.kernelFams == nil && a.cfg.podFams == nil {
		return nil
	}
	known := map[string]bool{}
	for _, c := range a.mapper.Curated() {
		stem := strings.TrimPrefix(c.Name, mapping.NamePrefix)
		switch {
		case strings.HasSuffix(stem, "_total"):
			known[strings.TrimSuffix(stem, "_total")] = true
		case strings.HasSuffix(stem, "_ratio"):
			known[strings.TrimSuffix(stem, "_ratio")+"_seconds"] = true
		}
	}
	for _, e := range catalog {
		mm, err := a.mapper.Map(e.Name, e.Properties)
		if err != nil || mm.Desc == nil {
			continue
		}
		if kd, _, _, ok := derived(mm); ok {
			known[FamilyStem(kd.Name)] = true
		}
	}
	for what, set := range map[string]map[string]bool{"kernel": a.cfg.kernelFams, "pod": a.cfg.podFams} {
		for stem := range set {
			if !known[stem] {
				return fmt.Errorf("attribution: no sampled metric makes a per-%s family %q (these do: %s)",
					what, stem, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
			}
		}
	}
	return nil
}

// family interns a derived desc: metrics of one family (pcie rx and tx) share it; a desc
// whose name is taken by a different family gives nil.
func (a *Attributor) family(d *snapshot.Desc) *snapshot.Desc {
	old := a.families[d.Name]
	switch {
	case old == nil:
		a.families[d.Name] = d
		return d
	case old.Kind == d.Kind && old.Unit == d.Unit && strings.Join(old.LabelNames, ",") == strings.Join(d.LabelNames, ","):
		return old
	}
	return nil
}

// Add takes one PM batch (a pmdata.Consumer of the PM source) and attributes every sample
// of its device that is now older than the watermark.
func (a *Attributor) Add(b pmdata.Batch) {
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.devs[b.Device]
	if d == nil {
		d = a.device(b.Device, "")
	}
	d.lastBatch = now
	idx := make([]int32, len(b.Metrics))
	for j, name := range b.Metrics {
		idx[j] = a.metricIndex(name)
		d.switches = d.switches || a.metrics[idx[j]].ctxsw
	}
	vals := make([]float64, 0, len(b.Samples)*len(b.Metrics))
	for _, s := range b.Samples {
		start, end := int64(s.Start), int64(s.End)
		if !validSample(s, len(b.Metrics)) || start < 0 {
			d.droppedSamples[0]++
			a.logBad("sample_invalid", "PM sample left out of attribution: end <= start, NaN or wrong value count", "gpu", d.gpu)
			continue
		}
		if start < d.frontier {
			d.droppedSamples[1]++
			a.logBad("sample_before_frontier", "PM sample left out of attribution: it starts before samples already attributed", "gpu", d.gpu)
			continue
		}
		n := len(vals)
		vals = append(vals, s.Values...)
		d.samples = append(d.samples, psample{start: start, end: end, idx: idx, vals: vals[n:len(vals):len(vals)]})
		d.newest = max(d.newest, end)
	}
	a.release(d, d.newest-int64(a.cfg.watermark), now)
	a.maintain(now)
	a.settle()
	a.dirty.Store(true) // Snapshot rebuilds: once per scrape, not once per batch
}

func validSample(s pmdata.Sample, n int) bool {
	if s.End <= s.Start || len(s.Values) != n || s.End > math.MaxInt64/2 {
		return false
	}
	for _, v := range s.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Flush attributes every pending sample of every device now (at shutdown, and in tests).
func (a *Attributor) Flush() {
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, d := range a.devOrder {
		a.release(d, math.MaxInt64, now)
	}
	a.gc(now)
	a.settle()
	a.build(now)
}

// maintain releases the samples of devices that got no batch for a watermark of wall time
// (sampling paused or stopped) and discards records older than the watermark on devices
// without pending samples; it reports whether anything changed. a.mu is held.
func (a *Attributor) maintain(now time.Time) bool {
	if now.Sub(a.lastMaint) < a.cfg.watermark/4 {
		return false
	}
	a.lastMaint = now
	changed := false
	nowNS := now.UnixNano()
	for _, d := range a.devOrder {
		if now.Sub(d.lastBatch) < a.cfg.watermark {
			continue
		}
		if len(d.samples) > 0 {
			changed = a.release(d, math.MaxInt64, now) || changed
		}
		// Kernels of time no sample covers (sampling paused, device not sampled): nothing to
		// split; they stay visible in the activity families. Two watermarks leave room for
		// samples still in flight.
		cut := max(d.frontier, nowNS-2*int64(a.cfg.watermark))
		if n := a.prune(d, cut); n > 0 {
			changed = true
		}
	}
	a.gc(now)
	return changed
}

// prune drops pending and carried records that end before cut; a.mu is held.
func (a *Attributor) prune(d *devState, cut int64) int {
	gone := func(r rec) { a.unref(r.proc) }
	n := d.pending.prune(cut, gone)
	before := len(d.carry)
	d.carry = keepAfter(d.carry, cut, gone)
	return n + before - len(d.carry)
}

func (a *Attributor) unref(slot int32) {
	if slot >= 0 && int(slot) < len(a.slots) && a.slots[slot] != nil {
		a.slots[slot].refs--
	}
}

// gc forgets processes that are gone, hold no pending record and whose presence every
// device has attributed past (or that left four watermarks ago); a.mu is held.
func (a *Attributor) gc(now time.Time) {
	for p, ps := range a.procs {
		if ps.presEnd == math.MaxInt64 || ps.refs > 0 {
			continue
		}
		done := now.Sub(ps.goneAt) > 4*a.cfg.watermark
		if !done {
			done = true
			for _, d := range ps.devs {
				if d != nil && d.frontier < ps.presEnd {
					done = false
				}
			}
		}
		if done {
			for _, d := range a.devOrder { // its kernels' rates, and its turns' record
				for k := range d.carried {
					if k.pid == ps.pid && k.pid != 0 {
						delete(d.carried, k)
					}
				}
				d.turn.Forget(turns.TracedKey(ps.slot, ps.pid))
			}
			delete(a.procs, p)
			a.slots[ps.slot] = nil
			a.freeSlots = append(a.freeSlots, ps.slot)
		}
	}
	// Coverage older than every frontier of a process's sampled devices is no longer read
	// (devices that never got a sample read none before two watermarks ago).
	for _, ps := range a.procs {
		lo := int64(math.MaxInt64)
		for _, d := range ps.devs {
			switch {
			case d == nil:
			case d.frontier > 0:
				lo = min(lo, d.frontier)
			default:
				lo = min(lo, now.UnixNano()-2*int64(a.cfg.watermark))
			}
		}
		lo = max(lo, now.UnixNano()-int64(a.cfg.farClock)) // a long pause: nothing that old comes back
		k := 0
		for k < len(ps.spans) && ps.spans[k].end <= lo {
			k++
		}
		if k > 0 {
			ps.spans = append(ps.spans[:0], ps.spans[k:]...)
		}
	}
}

// ProcessConnected implements activity.Listener.
func (a *Attributor) ProcessConnected(p *record.Process, info activity.ProcessInfo) {
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.dirty.Store(true)
	if old := a.procs[p]; old != nil { // a second hello: refresh the devices and pod
		a.fill(old, info)
		return
	}
	defer a.settle()
	ps := &proc{pid: p.PID, presStart: now.UnixNano(), presEnd: math.MaxInt64}
	a.fill(ps, info)
	if n := len(a.freeSlots); n > 0 {
		ps.slot = a.freeSlots[n-1]
		a.freeSlots = a.freeSlots[:n-1]
		a.slots[ps.slot] = ps
	} else {
		ps.slot = int32(len(a.slots))
		a.slots = append(a.slots, ps)
	}
	a.procs[p] = ps
}

func (a *Attributor) fill(ps *proc, info activity.ProcessInfo) {
	ps.pod = podKey{namespace: info.Namespace, pod: info.Pod, container: info.Container, source: sourceKernel}
	ps.podPrio = info.PodPriority
	ps.devs = make([]*devState, max(len(info.GPUs), len(info.UUIDs)))
	for i := range ps.devs {
		if i < len(info.GPUs) {
			ps.devs[i] = a.byGPU[info.GPUs[i]]
		}
		if ps.devs[i] == nil && i < len(info.UUIDs) && info.UUIDs[i] != "" {
			ps.devs[i] = a.byUUID[strings.ToLower(info.UUIDs[i])]
		}
	}
}

// onDevice reports whether process ps uses device d (one of its CUDA ordinals maps to it).
func (ps *proc) onDevice(d *devState) bool {
	for _, x := range ps.devs {
		if x == d {
			return true
		}
	}
	return false
}

// ProcessDisconnected implements activity.Listener: the process stays known (its records and
// coverage still count) until the join has passed the time it left.
func (a *Attributor) ProcessDisconnected(p *record.Process) {
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.dirty.Store(true)
	ps := a.procs[p]
	if ps == nil {
		return
	}
	if ps.presEnd == math.MaxInt64 {
		ps.presEnd = max(now.UnixNano(), ps.lastSpan)
		ps.goneAt = now
	}
}

// Records implements activity.Listener: kernel, memcpy and memset records are held for the
// join; other kinds are ignored.
func (a *Attributor) Records(p *record.Process, recs []record.Record) {
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.dirty.Store(true)
	ps := a.procs[p]
	if ps == nil {
		a.drop("unknown_process", uint64(len(recs)), "records of a process that never connected", "pid", p.PID)
		return
	}
	nowNS := now.UnixNano()
	for i := range recs {
		r := &recs[i]
		var class int32
		switch r.Kind {
		case record.KindKernel:
			class = a.classID(r.Name)
		case record.KindMemcpy:
			class = classMemcpy
		case record.KindMemset:
			class = classMemset
		default:
			continue
		}
		if int64(r.Device) >= int64(len(ps.devs)) || ps.devs[r.Device] == nil {
			a.drop("unknown_device", 1, "records of a GPU that is not sampled", "pid", p.PID, "device", r.Device)
			continue
		}
		d := ps.devs[r.Device]
		start, end := int64(r.Start), int64(r.End)
		if r.End < r.Start || r.End > math.MaxInt64/2 {
			a.drop("bad_span", 1, "record ends before it starts", "pid", p.PID, "start", r.Start, "end", r.End)
			continue
		}
		ref := d.newest
		if ref == 0 {
			ref = nowNS
		}
		if abs(start-ref) > int64(a.cfg.farClock) {
			a.drop("far_clock", 1, "record far from the GPU's sample clock (another time base?)", "pid", p.PID,
				"gpu", d.gpu, "record_start", r.Start, "reference", ref)
			continue
		}
		if end > max(ref, nowNS)+int64(maxAhead) { // a record comes after its kernel ends
			a.drop("ends_ahead", 1, "record ends in the future (another time base, or made up)", "pid", p.PID,
				"gpu", d.gpu, "record_end", r.End, "reference", max(ref, nowNS))
			continue
		}
		ps.presStart = min(ps.presStart, start)
		if start < d.frontier { // part or all of its time was attributed already
			d.late++
			d.lateSeconds += float64(min(end, d.frontier)-start) / 1e9
			if end <= d.frontier {
				continue
			}
			start = d.frontier
		}
		if end == start {
			continue
		}
		if d.pending.len() >= a.cfg.maxPending {
			a.drop("pending_full", 1, "pending records full: raise --attribution.max-pending-records or lower the watermark", "gpu", d.gpu)
			continue
		}
		if !a.holdRecord() {
			a.drop("memory_budget", 1, "the memory budget is full (--activity.memory-budget)", "gpu", d.gpu)
			continue
		}
		d.pending.add(rec{start: start, end: end, class: class, proc: ps.slot})
		ps.refs++
	}
	a.maintain(now)
	a.settle()
}

// classID interns a kernel name as a class, if the class table and the memory budget take
// it; else the name's records are joined as "other" (counted). a.mu is held.
func (a *Attributor) classID(name string) int32 {
	t := &a.classes
	if t.lastID >= 0 && name == t.last {
		return t.lastID
	}
	if id, ok := t.byName[name]; ok { // one lookup for a known name: most records
		t.last, t.lastID = name, id
		return id
	}
	switch {
	case len(t.names) >= maxClasses:
		a.folded["table_full"]++
		return classOther
	case !a.classRoom(name):
		a.folded["memory_budget"]++
		return classOther
	}
	return t.id(name)
}

// Coverage implements activity.Listener: spans the process traced (non-lossy ones) make the
// gaps between its kernels idle instead of untraced.
func (a *Attributor) Coverage(p *record.Process, spans []record.Interval) {
	now := a.cfg.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.dirty.Store(true)
	ps := a.procs[p]
	if ps == nil {
		a.badSpan("unknown_process", uint64(len(spans)), "pid", p.PID)
		return
	}
	ref := now.UnixNano()
	for _, d := range ps.devs {
		if d != nil && d.newest > 0 {
			ref = d.newest
			break
		}
	}
	for _, s := range spans {
		start, end := int64(s.Start), int64(s.End)
		switch {
		case s.End <= s.Start || s.End > math.MaxInt64/2:
			a.badSpan("bad_span", 1, "pid", p.PID, "start", s.Start, "end", s.End)
			continue
		case abs(start-ref) > int64(a.cfg.farClock):
			a.badSpan("far_clock", 1, "pid", p.PID, "start", s.Start, "reference", ref)
			continue
		case start < ps.lastSpan:
			a.badSpan("out_of_order", 1, "pid", p.PID, "start", s.Start, "previous_end", ps.lastSpan)
		}
		ps.lastSpan = max(ps.lastSpan, end)
		ps.presStart = min(ps.presStart, start)
		if s.Lossy {
			continue
		}
		ps.spans = insertSpan(ps.spans, span{start, end})
	}
	a.settle()
}

// insertSpan adds s to a sorted list of disjoint spans, merging what it touches.
func insertSpan(list []span, s span) []span {
	i := len(list)
	for i > 0 && list[i-1].start > s.start { // spans come in order: the loop rarely runs
		i--
	}
	list = append(list, span{})
	copy(list[i+1:], list[i:])
	list[i] = s
	// merge around i
	lo := max(i-1, 0)
	out := list[:lo]
	for _, x := range list[lo:] {
		if n := len(out); n > 0 && x.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, x.end)
			continue
		}
		out = append(out, x)
	}
	return out
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// logState rate-limits the log line of one kind of bad input.
type logState struct {
	last       time.Time
	suppressed uint64
}

const logEvery = time.Minute

// logBad logs msg at most once a minute per key, with the number of lines suppressed.
func (a *Attributor) logBad(key, msg string, args ...any) {
	now := a.cfg.now()
	st := a.logs[key]
	if st == nil {
		st = &logState{}
		a.logs[key] = st
	}
	if !st.last.IsZero() && now.Sub(st.last) < logEvery {
		st.suppressed++
		return
	}
	if st.suppressed > 0 {
		args = append(args, "suppressed_since_last_log", st.suppressed)
	}
	st.last, st.suppressed = now, 0
	a.logger.Warn(msg, args...)
}

func (a *Attributor) drop(reason string, n uint64, msg string, args ...any) {
	a.dropped[reason] += n
	a.logBad("record_"+reason, "kernel record left out of attribution: "+msg, append(args, "reason", reason)...)
}

func (a *Attributor) badSpan(reason string, n uint64, args ...any) {
	a.badCov[reason] += n
	a.logBad("coverage_"+reason, "bad traced-time span from a process", append(args, "reason", reason)...)
}
