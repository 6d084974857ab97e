package profilers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// fakeHost is a /proc tree the tests write processes into.
type fakeHost struct {
	t    *testing.T
	root string
	last int
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{t: t, root: t.TempDir(), last: 100}
	h.loadavg()
	return h
}

func (h *fakeHost) loadavg() {
	h.write("loadavg", fmt.Sprintf("0.00 0.01 0.05 1/200 %d\n", h.last))
}

func (h *fakeHost) write(rel, data string) {
	h.t.Helper()
	p := filepath.Join(h.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// start adds a process (a new PID, as the kernel hands them out) and returns its PID.
func (h *fakeHost) start(comm string, args []string, env map[string]string) int {
	h.last++
	h.exec(h.last, comm, args, env, uint64(h.last))
	h.loadavg()
	return h.last
}

// exec (re)writes a process's files: a new name, arguments and environment under the same PID.
func (h *fakeHost) exec(pid int, comm string, args []string, env map[string]string, start uint64) {
	d := fmt.Sprint(pid)
	h.write(d+"/stat", statLine(pid, comm, start, 17))
	h.write(d+"/cmdline", strings.Join(args, "\x00")+"\x00")
	var e []string
	for k, v := range env {
		e = append(e, k+"="+v)
	}
	h.write(d+"/environ", strings.Join(e, "\x00"))
	h.write(d+"/maps", "")
}

// statLine is a /proc/PID/stat line as the kernel writes it (fields 1..52): the start time is
// field 22, the exit signal field 38 (17 for a process, -1 for a thread other than the first).
func statLine(pid int, comm string, start uint64, exitSignal int) string {
	return fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %d 1000000 100 18446744073709551615 "+
		"1 1 0 0 0 0 0 0 0 0 0 0 %d 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n", pid, comm, pid, pid, start, exitSignal)
}

// thread adds a thread to a process: a new PID from the counter whose /proc/TID/stat tells a
// thread. (The kernel's listing of /proc leaves threads out; the fake's does not, and the
// watcher skips threads either way.)
func (h *fakeHost) thread(comm string) int {
	h.last++
	h.write(fmt.Sprintf("%d/stat", h.last), statLine(h.last, comm, uint64(h.last), -1))
	h.loadavg()
	return h.last
}

func (h *fakeHost) exit(pid int) {
	if err := os.RemoveAll(filepath.Join(h.root, fmt.Sprint(pid))); err != nil {
		h.t.Fatal(err)
	}
}

// recorder is a Sampler that records the give-ways and take-backs.
type recorder struct {
	mu     sync.Mutex
	devs   []pmdata.Device
	events []string
}

func (r *recorder) Devices() []pmdata.Device { return r.devs }
func (r *recorder) GiveWay(d int, h pmdata.Holder) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("give %d %s %d %s", d, h.Tool, h.PID, h.Comm))
}
func (r *recorder) TakeBack(d int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("back %d", d))
}

// take returns the events since the last call.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

func twoGPUs() *recorder {
	return &recorder{devs: []pmdata.Device{{Index: 0, UUID: "GPU-aaaa"}, {Index: 1, UUID: "GPU-bbbb"}}}
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Unix(1_800_000_000, 0)} }
func watcher(h *fakeHost, r *recorder, c *clock, opts ...Option) *Watcher {
	w := New(nil, append([]Option{WithProcRoot(h.root), WithClock(c.now)}, opts...)...)
	w.Drive(r)
	return w
}

func want(t *testing.T, got []string, w ...string) {
	t.Helper()
	if !slices.Equal(got, w) {
		t.Fatalf("events %q, want %q", got, w)
	}
}

func TestWatcherGivesWayToNcuAndTakesBack(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	h.start("bash", []string{"bash"}, nil)
	w := watcher(h, r, c)
	want(t, r.take())
	ncu := h.start("ncu", []string{"ncu", "-c", "3", "./app"}, nil)
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", ncu), fmt.Sprintf("give 1 ncu %d ncu", ncu))
	// its target starts (injected): same give-way, nothing new
	app := h.start("app", []string{"./app"}, map[string]string{"CUDA_INJECTION64_PATH": "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so"})
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take())
	h.exit(app)
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take()) // ncu still runs
	h.exit(ncu)
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), "back 0", "back 1")
}

func TestWatcherProfilerAlreadyRunning(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	ncu := h.start("ncu", []string{"ncu", "./app"}, nil)
	w := New(nil, WithProcRoot(h.root), WithClock(c.now)) // looks once, before the sampler exists
	if !w.Found() {
		t.Fatal("Found() = false with ncu running")
	}
	w.Drive(r) // gives way before the sampler's Run
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", ncu), fmt.Sprintf("give 1 ncu %d ncu", ncu))
}

func TestWatcherSeesAYoungProcessExec(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c)
	pid := h.start("python3", []string{"python3", "run.py"}, nil) // forked, not yet exec'd
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take())
	h.exec(pid, "ncu", []string{"ncu", "./app"}, nil, uint64(pid)) // exec: no new PID
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", pid), fmt.Sprintf("give 1 ncu %d ncu", pid))
	h.exit(pid)
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), "back 0", "back 1")
	// A process older than youngFor is not read again: an exec that late goes unseen (a limit).
	old := h.start("python3", []string{"python3"}, nil)
	c.add(100 * time.Millisecond)
	w.Poll()
	c.add(youngFor)
	h.exec(old, "ncu", []string{"ncu"}, nil, uint64(old))
	w.Poll()
	want(t, r.take())
	// The kernel's exec events lift that limit: the exec reported, the process is read again.
	w.execd([]int{old})
	w.apply()
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", old), fmt.Sprintf("give 1 ncu %d ncu", old))
}

// TestWatcherExecdThenPolled: a process read at its exec is not read as new again when the PID
// counter's range passes it, and threads and unknown PIDs reported are skipped.
func TestWatcherExecdThenPolled(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c)
	pid := h.start("nsys", []string{"nsys", "profile", "--gpu-metrics-devices=all", "./app"}, nil)
	tid := h.thread("nsys")
	c.add(10 * time.Millisecond)
	w.execd([]int{pid, tid, 99999})
	w.apply()
	want(t, r.take(), fmt.Sprintf("give 0 nsys %d nsys", pid), fmt.Sprintf("give 1 nsys %d nsys", pid))
	if len(w.young) != 1 || w.known[tid] != nil {
		t.Fatalf("young %v, known thread %v: want the process once and no thread", w.young, w.known[tid])
	}
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take())
	if len(w.young) != 1 {
		t.Fatalf("young %v after the poll: the process was read as new again", w.young)
	}
}

// TestWatcherPeriod: with exec events the watcher looks once a second until a profiler runs,
// then every poll until it ends; without them, every poll.
func TestWatcherPeriod(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c)
	if got := w.period(false); got != DefaultPoll {
		t.Errorf("without exec events: %v, want %v", got, DefaultPoll)
	}
	if got := w.period(true); got != mapsPeriod {
		t.Errorf("with exec events, no profiler: %v, want %v", got, mapsPeriod)
	}
	ncu := h.start("ncu", []string{"ncu"}, nil)
	w.execd([]int{ncu})
	if got := w.period(true); got != DefaultPoll {
		t.Errorf("with exec events, ncu running: %v, want %v", got, DefaultPoll)
	}
	h.exit(ncu)
	c.add(100 * time.Millisecond)
	w.Poll()
	if got := w.period(true); got != mapsPeriod {
		t.Errorf("with exec events, ncu gone: %v, want %v", got, mapsPeriod)
	}
}

func TestWatcherReadsOnlyTheNewPIDs(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	for range 50 {
		h.start("bash", []string{"bash"}, nil)
	}
	w := watcher(h, r, c)
	scans, probes := w.scans, w.probes
	for range 5 {
		c.add(100 * time.Millisecond)
		w.Poll()
	}
	if w.scans != scans || w.probes != probes {
		t.Fatalf("%d listings and %d PIDs read with no PID handed out, want none", w.scans-scans, w.probes-probes)
	}
	// A few new PIDs: each read once, /proc not listed.
	h.start("sleep", []string{"sleep", "1"}, nil)
	ncu := h.start("ncu", []string{"ncu", "./app"}, nil)
	c.add(100 * time.Millisecond)
	w.Poll()
	if w.scans != scans || w.probes != probes+2 {
		t.Fatalf("after 2 new PIDs: %d listings, %d PIDs read; want 0 and 2", w.scans-scans, w.probes-probes)
	}
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", ncu), fmt.Sprintf("give 1 ncu %d ncu", ncu))
	// More than probeMax at once: one listing, and only the processes in the new range read.
	for range probeMax {
		h.start("bash", []string{"bash"}, nil)
	}
	nsys := h.start("nsys", []string{"nsys", "profile", "--gpu-metrics-devices=all"}, nil)
	c.add(100 * time.Millisecond)
	w.Poll()
	if w.scans != scans+1 || w.probes != probes+2 {
		t.Fatalf("after %d new PIDs: %d listings, %d PIDs read; want 1 and 0", probeMax+1, w.scans-scans, w.probes-probes-2)
	}
	want(t, r.take()) // GPUs already given to ncu, the earlier holder
	if w.holders[nsys] == nil {
		t.Fatal("nsys in the listed range not found")
	}
	// What is kept: the young processes only, not every process on the host.
	c.add(youngFor)
	w.Poll()
	if len(w.known) != 0 {
		t.Fatalf("%d processes kept once none is young and none is a candidate, want 0", len(w.known))
	}
}

func TestWatcherSkipsThreads(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c)
	// ncu's own threads carry its name: only the process is a holder.
	ncu := h.start("ncu", []string{"ncu", "./app"}, nil)
	tid := h.thread("ncu")
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", ncu), fmt.Sprintf("give 1 ncu %d ncu", ncu))
	if w.holders[tid] != nil || w.known[tid] != nil {
		t.Fatalf("thread %d of ncu %d taken for a process", tid, ncu)
	}
	// The same in a listing (many PIDs at once).
	scans := w.scans
	for range probeMax + 1 {
		h.thread("ncu")
	}
	c.add(100 * time.Millisecond)
	w.Poll()
	if w.scans != scans+1 || len(w.holders) != 1 {
		t.Fatalf("%d holders after ncu's threads were listed (%d listings), want 1", len(w.holders), w.scans-scans)
	}
}

func TestWatcherPIDCounterWraps(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	h.last = 4_194_300                          // near pid_max (4194304 on 64-bit hosts)
	old := h.start("ncu", []string{"ncu"}, nil) // running before the watcher
	w := watcher(h, r, c)
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", old), fmt.Sprintf("give 1 ncu %d ncu", old))
	h.exit(old)
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), "back 0", "back 1")
	h.start("bash", []string{"bash"}, nil) // 4194302
	h.last = 300                           // the kernel wraps to 300 (RESERVED_PIDS)
	nsys := h.start("nsys", []string{"nsys", "--gpu-metrics-devices=0"}, nil)
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 nsys %d nsys", nsys), fmt.Sprintf("give 1 nsys %d nsys", nsys))
}

func TestWatcherWithoutPIDCounter(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	h.write("loadavg", "unreadable\n")
	w := watcher(h, r, c)
	ncu := h.start("ncu", []string{"ncu"}, nil)
	h.write("loadavg", "unreadable\n")
	c.add(100 * time.Millisecond)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", ncu), fmt.Sprintf("give 1 ncu %d ncu", ncu))
}

func TestWatcherGivesOnlyTheProfilersGPUs(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c)
	// A pod's container: the device plugin's NVIDIA_VISIBLE_DEVICES names its GPU by UUID.
	a := h.start("ncu", []string{"ncu"}, map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-bbbb"})
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 1 ncu %d ncu", a))
	// Indices (relative to what the process sees) say nothing about the host's GPUs: all.
	b := h.start("nsys", []string{"nsys", "profile", "--gpu-metrics-devices=0"}, map[string]string{"CUDA_VISIBLE_DEVICES": "0"})
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 nsys %d nsys", b))
	h.exit(a)
	w.Poll()
	// GPU 1 goes to the other holder (no take-back between): it is given again, to it.
	want(t, r.take(), fmt.Sprintf("give 1 nsys %d nsys", b))
	h.exit(b)
	w.Poll()
	want(t, r.take(), "back 0", "back 1")
	// A container without GPUs gets none.
	h.start("ncu", []string{"ncu"}, map[string]string{"NVIDIA_VISIBLE_DEVICES": "void"})
	w.Poll()
	want(t, r.take())
}

func TestWatcherDCGMLoadsItsModuleLater(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	eng := h.start("nv-hostengine", []string{"nv-hostengine", "-n"}, nil)
	w := watcher(h, r, c)
	c.add(2 * mapsPeriod)
	w.Poll()
	want(t, r.take())
	h.write(fmt.Sprint(eng)+"/maps", "7f00-7f10 r-xp 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libdcgmmoduleprofiling.so.4\n")
	c.add(mapsPeriod / 2)
	w.Poll()
	want(t, r.take()) // mappings are read once a second
	c.add(mapsPeriod)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 dcgm %d nv-hostengine", eng), fmt.Sprintf("give 1 dcgm %d nv-hostengine", eng))
}

func TestWatcherPIDReusedIsNotTheProfiler(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c)
	ncu := h.start("ncu", []string{"ncu"}, nil)
	w.Poll()
	r.take()
	h.exec(ncu, "bash", []string{"bash"}, nil, 999999) // ncu gone, its PID reused at once
	c.add(youngFor)
	w.Poll()
	want(t, r.take(), "back 0", "back 1")
}

func TestWatcherNamedTools(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	w := watcher(h, r, c, WithNames(" my-sampler ", ""))
	pid := h.start("my-sampler", []string{"my-sampler"}, nil)
	w.Poll()
	want(t, r.take(), fmt.Sprintf("give 0 named %d my-sampler", pid), fmt.Sprintf("give 1 named %d my-sampler", pid))
}

func TestWatcherListingFailureLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	root := filepath.Join(t.TempDir(), "proc")
	c := newClock()
	w := New(log, WithProcRoot(root), WithClock(c.now)) // no such tree: every look fails
	for range 20 {
		c.add(100 * time.Millisecond)
		w.Poll()
	}
	if n := strings.Count(buf.String(), "listing processes failed"); n != 1 {
		t.Fatalf("%d warnings in 21 failed looks, want 1:\n%s", n, buf.String())
	}
	h := &fakeHost{t: t, root: root, last: 100}
	h.loadavg()
	ncu := h.start("ncu", []string{"ncu"}, nil)
	r := twoGPUs()
	w.Drive(r)
	c.add(100 * time.Millisecond)
	w.Poll()
	if !strings.Contains(buf.String(), "listing processes works again") {
		t.Fatalf("no line when the listing worked again:\n%s", buf.String())
	}
	// The first listing that works is the first look: what runs then is found.
	want(t, r.take(), fmt.Sprintf("give 0 ncu %d ncu", ncu), fmt.Sprintf("give 1 ncu %d ncu", ncu))
}

// busyExecs is an exec source on a node that execs all the time: every Wait returns at once.
type busyExecs struct {
	mu      sync.Mutex
	waits   int
	closed  chan struct{}
	pid     int
	failing bool // every Wait fails, as records that cannot be read any more
}

func (b *busyExecs) Wait(pids []int, max int) ([]int, bool, error) {
	select {
	case <-b.closed:
		return pids, false, os.ErrClosed
	default:
	}
	if b.failing {
		return pids, false, errors.New("read failed")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waits++
	return append(pids, b.pid), false, nil
}
func (b *busyExecs) Lost() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return uint64(b.waits) // one record lost at each wake-up
}
func (b *busyExecs) CPUs() int { return 1 }
func (b *busyExecs) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

// TestWatcherExecsPaced: execs reported without pause are looked at 10 ms apart for a burst of
// execBurst, then execGap (100 ms) apart, not at each report: a node that execs all the time
// costs no more looks than the default poll, whatever the poll is set to.
func TestWatcherExecsPaced(t *testing.T) {
	h, r, c := newFakeHost(t), twoGPUs(), newClock()
	src := &busyExecs{closed: make(chan struct{}), pid: h.start("bash", []string{"bash"}, nil)}
	w := watcher(h, r, c, WithPoll(MaxPoll), withExecs(func() (execSource, error) { return src, nil }))
	runFor(w, 550*time.Millisecond)
	src.mu.Lock()
	defer src.mu.Unlock()
	// 8 at 10 ms, then one every 100 ms: about 12 in 550 ms (55 if each report were looked at
	// 10 ms later).
	if src.waits < execBurst || src.waits > execBurst+7 {
		t.Fatalf("%d batches in 550 ms, want %d to %d (%d at once, then one every %v)", src.waits, execBurst, execBurst+7, execBurst, execGap)
	}
}

// TestWatcherSnapshot: the watch's mode and the exec records lost, once Run has chosen.
func TestWatcherSnapshot(t *testing.T) {
	value := func(w *Watcher, name string) (float64, bool) {
		for _, f := range w.Snapshot().Families {
			if f.Desc.Name == name && len(f.Samples) == 1 {
				return f.Samples[0].Value, true
			}
		}
		return 0, false
	}
	for _, tc := range []struct {
		name string
		want float64
	}{{"poll", 0}, {"refused", 0}, {"exec records", 1}, {"exec records failing", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			h, r, c := newFakeHost(t), twoGPUs(), newClock()
			src := &busyExecs{closed: make(chan struct{}), pid: h.start("bash", []string{"bash"}, nil)}
			var execs func() (execSource, error) // poll: none
			switch tc.name {
			case "refused":
				execs = func() (execSource, error) { return nil, os.ErrPermission }
			case "exec records", "exec records failing":
				src.failing = tc.name == "exec records failing"
				execs = func() (execSource, error) { return src, nil }
			}
			w := watcher(h, r, c, withExecs(execs))
			if fams := w.Snapshot().Families; len(fams) != 0 {
				t.Fatalf("%d families before Run, want none", len(fams))
			}
			runFor(w, 150*time.Millisecond)
			if v, ok := value(w, "cupti_pm_give_way_exec_events"); !ok || v != tc.want {
				t.Errorf("cupti_pm_give_way_exec_events = %v (served %v), want %v", v, ok, tc.want)
			}
			// The source loses one record a wake-up; its pump may wake once more after Run returned.
			lost, ok := value(w, "cupti_pm_give_way_exec_records_lost_total")
			if n := float64(src.Lost()); !ok || lost > n || (tc.want == 1) != (lost > 0) {
				t.Errorf("cupti_pm_give_way_exec_records_lost_total = %v (served %v), the source lost %v", lost, ok, n)
			}
		})
	}
}

// runFor runs w for d, then ends its Run and waits for it to return.
func runFor(w *Watcher, d time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	time.Sleep(d)
	cancel()
	<-done
}
