package profilers

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/cupti-exporter/cupti-exporter/internal/tick"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/profilers/execevents"
	"github.com/cupti-exporter/cupti-exporter/profilers/procfs"
)

// Sampler is what a Watcher drives: pmsample's *Sampler.
type Sampler interface {
	Devices() []pmdata.Device
	GiveWay(device int, h pmdata.Holder)
	TakeBack(device int)
}

// Defaults of a Watcher, and the bounds the exporter accepts for its poll
// (pmsample.give_way_poll).
const (
	DefaultPoll = 100 * time.Millisecond
	MinPoll     = 10 * time.Millisecond
	MaxPoll     = time.Second
	// youngFor is how long a new process's name is read again: a fork shows its parent's name
	// until it execs.
	youngFor = time.Second
	// mapsPeriod is how often a process whose name matches a rule that reads its mappings is
	// examined again (DCGM loads its profiling module when a profiling field is first watched).
	mapsPeriod = time.Second
	// probeMax is the most PIDs handed out since the last poll that are read one by one; past it
	// (or when the counter wrapped) /proc is listed instead, and only the processes in the range
	// read. On the 2-core build machine a listing cost 0.6 µs a process, reading a PID's stat
	// 9.7 µs (3.3 µs for a PID no longer there): 32 PIDs read cost what listing a 500-process
	// node does, and bound a poll's reads at about 0.3 ms.
	probeMax = 32
	// execMax is the most exec'd PIDs read one by one at a look; past it the watcher reads the
	// PID counter's range instead (as when the kernel lost records), as a poll would.
	execMax = probeMax
	// execSettle is how long the watcher waits after an exec is reported before reading the
	// process: the kernel reports the exec before it has set up the new program's arguments and
	// environment, which rules read (Nsight Systems' arguments).
	execSettle = 10 * time.Millisecond
	// execGap and execBurst pace the looks at reported execs: a burst of execBurst (a shell
	// starting a profiler through a few programs) is looked at execSettle after each; past it,
	// one look every execGap, so a node that execs all the time is looked at as often as the
	// default poll would, and a profiler among its execs is found as soon (whatever the poll,
	// which with exec events only paces the looks while a profiler runs).
	execGap   = DefaultPoll
	execBurst = 8
)

// The watch's modes (Watcher.execMode).
const (
	execUndecided int32 = iota
	execOn
	execOff
)

// execSource reports the processes that exec'd (execevents.Source; a fake in tests).
type execSource interface {
	Wait(pids []int, max int) ([]int, bool, error)
	Lost() uint64
	CPUs() int
	Close() error
}

// Watcher finds profilers among the host's processes and gives them the GPUs' counters.
type Watcher struct {
	s     Sampler
	log   *slog.Logger
	fs    procfs.FS
	poll  time.Duration
	named []string
	self  int
	now   func() time.Time
	// openExecs opens the kernel's exec events (nil: poll only). With them the watcher looks
	// every poll only while a profiler runs (to see it end), else once a second and at once
	// when a process execs.
	openExecs func() (execSource, error)
	execMode  atomic.Int32  // execUndecided until Run opened the exec records (execOn) or could not (execOff)
	execLost  atomic.Uint64 // exec records the kernel dropped
	started   time.Time     // when New ran: the lost records counter's start

	// owned by Run (and New's first scan)
	lastPID     int
	known       map[int]*seen   // the processes read again later: the young ones and the candidates
	young       []int           // those first seen less than youngFor ago (and some older, pruned by Poll)
	holders     map[int]*holder // the profilers found
	given       map[int]int     // devices given away: the PID of the holder they went to
	listed      map[int]bool    // the last listing's PIDs (new ones are told by them only without a PID counter)
	devices     []pmdata.Device
	scans       int  // listings of /proc, for tests and the debug log
	probes      int  // PIDs read because the counter passed them, for tests
	listFailing bool // the last listing failed (logged once)
	lastMap     time.Time
}

// seen is a process as first examined.
type seen struct {
	comm      string
	start     uint64
	first     time.Time
	candidate bool // its name matches a rule that reads its mappings
}

// holder is a profiler found, and the GPUs it gets by UUID (nil: every GPU).
type holder struct {
	pmdata.Holder
	start uint64
	uuids []string
	since time.Time
}

// Option configures a Watcher.
type Option func(*Watcher)

// WithProcRoot reads another /proc tree (default /proc; tests use a fake one). The kernel's
// exec events name PIDs of the exporter's own namespace, so they are used with /proc only.
func WithProcRoot(dir string) Option {
	return func(w *Watcher) {
		w.fs.Root = dir
		if filepath.Clean(dir) != "/proc" {
			w.openExecs = nil
		}
	}
}

// withExecs replaces the kernel's exec events (tests; nil polls only).
func withExecs(open func() (execSource, error)) Option {
	return func(w *Watcher) { w.openExecs = open }
}

// WithPoll sets how often processes are looked at (default 100 ms); non-positive keeps it.
func WithPoll(d time.Duration) Option {
	return func(w *Watcher) {
		if d > 0 {
			w.poll = d
		}
	}
}

// WithNames adds process names (comm; a trailing '*' matches a prefix) to give way to, counted
// with tool "named".
func WithNames(names ...string) Option {
	return func(w *Watcher) {
		for _, n := range names {
			if n = strings.TrimSpace(n); n != "" {
				w.named = append(w.named, n)
			}
		}
	}
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(w *Watcher) { w.now = now } }

// New returns a Watcher that has looked at the processes already running once. Serve builds it
// before the sampler: when Found, pmsample must not read the counters' availability at start
// (pmsample.WithCountersInUse); then Drive hands it the sampler, which gives the profilers'
// GPUs away before its Run first asks for them.
func New(logger *slog.Logger, opts ...Option) *Watcher {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{log: logger.With("source", "profilers"), fs: procfs.FS{Root: "/proc"}, poll: DefaultPoll,
		self: os.Getpid(), now: time.Now, known: map[int]*seen{}, holders: map[int]*holder{}, given: map[int]int{},
		openExecs: func() (execSource, error) { return execevents.Open() }, started: time.Now()}
	for _, o := range opts {
		o(w)
	}
	w.Poll()
	return w
}

// Found reports whether a profiler runs now.
func (w *Watcher) Found() bool { return len(w.holders) > 0 }

// Drive makes s the sampler the Watcher gives GPUs from and takes them back to, and gives it
// away to the profilers found so far.
func (w *Watcher) Drive(s Sampler) {
	w.s = s
	w.devices = s.Devices()
	w.apply()
}

// Run looks at the processes until ctx ends: every poll, or, with the kernel's exec events,
// at each exec and once a second while no profiler runs.
func (w *Watcher) Run(ctx context.Context) {
	defer w.fs.Close()
	execs := w.startExecs(ctx)
	t := tick.New(w.period(execs != nil)) // on the timetable of PM sampling's decodes (internal/tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Poll()
		case b, ok := <-execs:
			if !ok { // the exec records failed (logged): poll from now on
				execs = nil
				w.execMode.Store(execOff)
				w.Poll()
				break
			}
			w.execd(b.pids)
			if b.overflow {
				w.Poll()
			}
			w.apply()
		}
		t.Reset(w.period(execs != nil))
	}
}

// period is how often the watcher looks: every poll while it has no exec events or a profiler
// runs (its end is seen by looking), else once a second: a new process is told by its exec.
func (w *Watcher) period(execs bool) time.Duration {
	if !execs || len(w.holders) > 0 {
		return w.poll
	}
	return max(w.poll, mapsPeriod)
}

// execBatch is what one wake-up of the exec events brings.
type execBatch struct {
	pids     []int
	overflow bool // records lost or too many: look at the PID counter's range too
}

// startExecs opens the kernel's exec events and returns the channel of their batches, or nil
// (the watcher polls) where they cannot be opened; the channel is closed if they fail later.
func (w *Watcher) startExecs(ctx context.Context) <-chan execBatch {
	if w.openExecs == nil {
		w.execMode.Store(execOff)
		return nil
	}
	src, err := w.openExecs()
	if err != nil {
		w.log.Info("looking at the processes every poll: the kernel's exec events cannot be opened", "poll", w.poll, "err", err)
		w.execMode.Store(execOff)
		return nil
	}
	w.execMode.Store(execOn)
	w.log.Info("looking at the processes at each exec (the kernel's perf events) and once a second", "cpus", src.CPUs())
	ch := make(chan execBatch)
	stop := context.AfterFunc(ctx, func() { src.Close() })
	go func() {
		defer func() {
			if stop() { // ended by an error of its own, not ctx
				src.Close()
				close(ch)
			}
		}()
		var lost uint64
		pace := rate.NewLimiter(rate.Every(execGap), execBurst)
		sleep := tick.NewSleeper() // a Go timer at each look woke the runtime's monitor thread
		defer sleep.Close()
		for {
			pids, overflow, err := src.Wait(nil, execMax)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("the kernel's exec events failed: looking at the processes every poll from now on", "poll", w.poll, "err", err)
				}
				return
			}
			if l := src.Lost(); l != lost {
				w.log.Warn("the kernel lost exec records (a ring was full): looking at every new PID", "lost", l-lost)
				w.execLost.Add(l - lost)
				lost = l
			}
			// The records that come meanwhile wait in the rings, for the next look.
			sleep.Sleep(max(execSettle, pace.Reserve().Delay()))
			select {
			case ch <- execBatch{pids: pids, overflow: overflow}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// execd reads the processes the kernel reported exec'ing: a known one under a new name, a new one
// as first seen now.
func (w *Watcher) execd(pids []int) {
	now := w.now()
	for _, pid := range pids {
		if k := w.known[pid]; k != nil {
			if st, ok := w.fs.Stat(pid); ok {
				w.examine(pid, st, now, k.first)
			}
			continue
		}
		w.look(pid, now, now)
	}
}

// Poll looks once: the processes that got a PID since the last look, processes younger than a
// second (an exec changes the name), the profilers found (gone?), the processes whose mappings a
// rule reads (every second); then gives and takes back GPUs.
//
// New processes are found by the PID counter (/proc/loadavg's last field): the kernel hands PIDs
// out in increasing order, wrapping at pid_max, so those handed out since the last look lie
// between its two readings. A few are read one by one; more, or a wrap, list /proc and read the
// PIDs in that range. A busy node hands out PIDs at every poll: listing all of /proc each time
// cost about 0.25 ms a poll at 500 processes (BenchmarkPoll), and more on larger nodes.
func (w *Watcher) Poll() {
	now := w.now()
	young := w.young[:0]
	for _, pid := range w.young {
		k := w.known[pid]
		if k == nil {
			continue
		}
		if now.Sub(k.first) >= youngFor {
			if !k.candidate {
				delete(w.known, pid)
			}
			continue
		}
		young = append(young, pid)
		st, ok := w.fs.Stat(pid)
		switch {
		case !ok || st.Start != k.start:
			delete(w.known, pid)
		case st.Comm != k.comm:
			w.examine(pid, st, now, k.first)
		}
	}
	w.young = young
	// The holders first: a PID handed out again in this look is then read as the new process.
	for pid, h := range w.holders {
		if st, ok := w.fs.Stat(pid); !ok || st.Start != h.start {
			delete(w.holders, pid)
			delete(w.known, pid)
			w.log.Info("profiler gone", "tool", h.Tool, "pid", pid, "comm", h.Comm, "lived", now.Sub(h.since).Round(time.Millisecond))
		}
	}
	last := w.fs.LastPID()
	switch {
	case w.scans == 0: // the first look: every process already running, none young
		w.list(now, func(int) bool { return true }, now.Add(-youngFor))
	case last == 0: // no counter to go by: list every poll, new = not listed before
		listed := w.listed
		pids := w.list(now, func(pid int) bool { return !listed[pid] }, now)
		w.listed = make(map[int]bool, len(pids))
		for _, pid := range pids {
			w.listed[pid] = true
		}
	case last != w.lastPID:
		w.handedOut(now, w.lastPID, last)
	}
	w.lastPID = last
	if now.Sub(w.lastMap) >= mapsPeriod {
		w.lastMap = now
		for pid, k := range w.known {
			if !k.candidate || w.holders[pid] != nil {
				continue
			}
			if st, ok := w.fs.Stat(pid); ok && st.Start == k.start {
				w.examine(pid, st, now, k.first)
			} else if now.Sub(k.first) >= youngFor {
				delete(w.known, pid)
			}
		}
	}
	w.apply()
}

// handedOut reads the processes whose PIDs the kernel handed out after prev up to last.
func (w *Watcher) handedOut(now time.Time, prev, last int) {
	if last > prev && last-prev <= probeMax {
		for pid := prev + 1; pid <= last; pid++ {
			w.probes++
			w.look(pid, now, now)
		}
		return
	}
	inRange := func(pid int) bool { return pid > prev && pid <= last }
	if last < prev { // wrapped at pid_max
		inRange = func(pid int) bool { return pid > prev || pid <= last }
	}
	w.list(now, inRange, now)
}

// list lists /proc and examines the processes isNew picks, as first seen at first (young when
// that is now). It returns the PIDs listed (nil when the listing failed).
func (w *Watcher) list(now time.Time, isNew func(pid int) bool, first time.Time) []int {
	pids, err := w.fs.PIDs()
	if err != nil {
		if !w.listFailing { // once, not at every poll (ten lines a second)
			w.log.Warn("listing processes failed: profilers cannot be found until it works", "root", w.fs.Root, "err", err)
		}
		w.listFailing = true
		return nil
	}
	if w.listFailing {
		w.log.Info("listing processes works again", "root", w.fs.Root)
		w.listFailing = false
	}
	w.scans++
	for _, pid := range pids {
		if isNew(pid) {
			w.look(pid, now, first)
		}
	}
	return pids
}

// look reads a process new to the watcher (not itself, not a thread) as first seen at first:
// young when that is now, else (already running at the first look) kept only as a candidate.
func (w *Watcher) look(pid int, now, first time.Time) {
	if pid == w.self {
		return
	}
	st, ok := w.fs.Stat(pid)
	if !ok || st.Thread {
		return
	}
	if k := w.known[pid]; k != nil && k.start == st.Start && k.comm == st.Comm {
		return // read already (its exec was reported)
	}
	w.examine(pid, st, now, first)
	switch {
	case first.Equal(now):
		w.young = append(w.young, pid)
	case !w.known[pid].candidate: // not read again
		delete(w.known, pid)
	}
}

// examine records a process read as st (while young or a candidate it is read again) and, when
// a rule matches, as a holder.
func (w *Watcher) examine(pid int, st procfs.Stat, now, first time.Time) {
	w.known[pid] = &seen{comm: st.Comm, start: st.Start, first: first, candidate: candidate(st.Comm)}
	p := &process{fs: &w.fs, pid: pid, name: st.Comm}
	r, ok := match(p, w.named)
	if !ok || w.holders[pid] != nil {
		return
	}
	h := &holder{Holder: pmdata.Holder{Tool: r.tool, PID: pid, Comm: st.Comm}, start: st.Start, uuids: gpusOf(p), since: now}
	w.holders[pid] = h
	args := strings.Join(p.cmdline(), " ")
	if len(args) > 200 {
		args = args[:200] + "..."
	}
	w.log.Info("profiler found: giving it the gpu counters", "tool", r.tool, "pid", pid, "comm", st.Comm, "cmdline", args, "gpus", describe(h.uuids))
}

// gpusOf reads which GPUs a process sees from its environment: the UUIDs in
// CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES (a container's, set by the device plugin);
// "none" or "void" in the latter: none (an empty list). Indices (relative to what the process
// sees), MIG instances or an environment it cannot read (another user's process without
// CAP_SYS_PTRACE): every GPU (nil).
func gpusOf(p *process) []string {
	for _, key := range []string{"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"} {
		v, ok := p.environ(key)
		if !ok {
			continue
		}
		switch v = strings.TrimSpace(v); v {
		case "", "all":
			return nil
		case "none", "void":
			if key == "NVIDIA_VISIBLE_DEVICES" {
				return []string{}
			}
			return nil
		}
		ids := strings.Split(v, ",")
		for i := range ids {
			ids[i] = strings.TrimSpace(ids[i])
		}
		if !slices.ContainsFunc(ids, func(id string) bool { return !strings.HasPrefix(id, "GPU-") }) {
			return ids
		}
	}
	return nil
}

// wants reports whether h wants device d.
func (h *holder) wants(d pmdata.Device) bool {
	return h.uuids == nil || slices.ContainsFunc(h.uuids, func(u string) bool { return strings.EqualFold(u, d.UUID) })
}

// apply gives every GPU that a holder wants to the earliest such holder, and takes back the
// GPUs no holder wants any more.
func (w *Watcher) apply() {
	if w.s == nil {
		return
	}
	want := map[int]*holder{}
	for _, h := range w.holders {
		for _, d := range w.devices {
			if !h.wants(d) {
				continue
			}
			if cur := want[d.Index]; cur == nil || h.since.Before(cur.since) || (h.since.Equal(cur.since) && h.PID < cur.PID) {
				want[d.Index] = h
			}
		}
	}
	for _, d := range w.devices {
		h, had := want[d.Index], w.given[d.Index]
		switch {
		case h != nil && h.PID != had:
			w.given[d.Index] = h.PID
			w.s.GiveWay(d.Index, h.Holder) // counted once per give-way; a new holder only updates the status
		case h == nil && had != 0:
			delete(w.given, d.Index)
			w.s.TakeBack(d.Index)
		}
	}
}

// describe lists GPU UUIDs for the log ("all" for nil).
func describe(uuids []string) string {
	if uuids == nil {
		return "all"
	}
	return "[" + strings.Join(uuids, ",") + "]"
}
