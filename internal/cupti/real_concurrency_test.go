package cupti_test

import (
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// TestRealConcurrentDecode measures, on the GPU machine, what CUPTI allows at once on one
// session (issue 14): (a) the serial loop (decode, evaluate, reset on one thread) as a
// baseline; (b) two counter data images, one thread decoding into one while another evaluates
// and re-initialises the other (pmsample's --pmsample.pipeline=double); (c) evaluation of
// disjoint sample ranges of one image on 1, 2 and 4 threads, checked value for value against
// the serial evaluation. It fails when CUPTI refuses (b) or (c) or (c) gives other values;
// the throughput figures go to the log. Interval CUPTI_CONC_INTERVAL (default 100us), metrics
// CUPTI_COST_METRICS (default four). An image whose decode stopped full is replaced, as the
// sampler does (CUPTI will not re-initialise it).
func TestRealConcurrentDecode(t *testing.T) {
	if os.Getenv("CUPTI_EXPORTER_REAL_TEST") != "1" {
		t.Skip("set CUPTI_EXPORTER_REAL_TEST=1 on a machine with a GPU and CUPTI 13 to run this")
	}
	iv := 100 * time.Microsecond
	if s := os.Getenv("CUPTI_CONC_INTERVAL"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 100*time.Microsecond {
			t.Fatalf("CUPTI_CONC_INTERVAL=%q: want a duration of at least 100us", s)
		}
		iv = d
	}
	l, err := cupti.Open(cupti.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	concurrentDecode(t, l, costMetrics(), iv, 2*time.Second)
}

// TestConcurrentDecodeFake runs the same experiment, briefly, against the fake library, so
// the code the GPU stage runs is tested here.
func TestConcurrentDecodeFake(t *testing.T) {
	concurrentDecode(t, open(t), testMetrics, time.Millisecond, 200*time.Millisecond)
}

func concurrentDecode(t *testing.T, l *cupti.Lib, metrics []string, iv, phase time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	chip, err := l.ChipName(0)
	if err != nil {
		t.Fatal(err)
	}
	avail, err := l.CounterAvailability(0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHost(chip, avail)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	img, err := h.ConfigImage(metrics)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(img.Free)
	s, err := l.Enable(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Disable() })
	if err := s.SetConfig(img, cupti.SetConfig{HardwareBufferSize: 64 << 20, Interval: uint64(iv.Nanoseconds()), Trigger: cupti.TriggerGPUTime}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	const period = 100 * time.Millisecond
	capacity := int(float64(period)/float64(iv)*1.25) + 16
	var images [2]*cupti.CounterData
	for i := range images {
		if images[i], err = s.NewCounterData(metrics, capacity); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { images[0].Free(); images[1].Free() }()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()

	// evaluate evaluates every completed sample of cd; it returns the sample count, the end of
	// the last sample, the sum of gaps between consecutive samples beyond half an interval
	// (starting from prevEnd), and the time in sample info + evaluation.
	evaluate := func(cd *cupti.CounterData, prevEnd uint64) (n int, last uint64, gaps time.Duration, cost time.Duration, err error) {
		t0 := time.Now()
		defer func() { cost = time.Since(t0) }()
		info, err := cd.Info()
		if err != nil {
			return 0, prevEnd, 0, 0, err
		}
		vals := make([]float64, len(metrics))
		last = prevEnd
		for i := range info.Completed {
			start, end, err := cd.SampleTimes(i)
			if err != nil {
				return n, last, gaps, 0, err
			}
			if last != 0 && start > last+uint64(iv)/2 {
				gaps += time.Duration(start - last)
			}
			last = end
			if err := h.Evaluate(cd, i, vals); err != nil {
				return n, last, gaps, 0, err
			}
			n++
		}
		return n, last, gaps, 0, nil
	}
	// renew re-initialises image i, or replaces it when its decode stopped full (CUPTI will not
	// re-initialise such an image).
	renew := func(i int, full bool) error {
		if !full {
			return images[i].Reset()
		}
		cd, err := s.NewCounterData(metrics, capacity)
		if err != nil {
			return err
		}
		images[i].Free()
		images[i] = cd
		return nil
	}
	type tally struct {
		samples                      int
		decode, eval, reset          time.Duration
		gaps                         time.Duration
		full, decodeErr, evalErr, re int
	}
	report := func(what string, tl tally, wall time.Duration, cpu time.Duration) {
		per := func(d time.Duration) float64 { return d.Seconds() * 1e6 / float64(max(tl.samples, 1)) }
		t.Logf("%s: %d samples in %v = %.0f/s of %.0f/s configured; per sample decode %.1f us, info+evaluate %.1f, reset %.1f; "+
			"gaps %v; full %d, decode errors %d, evaluate errors %d, reset errors %d; process CPU %.1f us/sample",
			what, tl.samples, wall.Round(time.Millisecond), float64(tl.samples)/wall.Seconds(), 1/iv.Seconds(),
			per(tl.decode), per(tl.eval), per(tl.reset), tl.gaps, tl.full, tl.decodeErr, tl.evalErr, tl.re, per(cpu))
	}

	// (a) serial: decode, evaluate, reset on this thread, every period.
	var a tally
	var prevEnd uint64
	cpu0, w0 := processCPU(), time.Now()
	for time.Since(w0) < phase {
		time.Sleep(period)
		t0 := time.Now()
		res, err := s.Decode(images[0])
		a.decode += time.Since(t0)
		if err != nil {
			a.decodeErr++
			continue
		}
		if res.StopReason == cupti.StopCounterDataFull {
			a.full++
		}
		n, last, gaps, cost, err := evaluate(images[0], prevEnd)
		a.samples, a.gaps, a.eval, prevEnd = a.samples+n, a.gaps+gaps, a.eval+cost, last
		if err != nil {
			a.evalErr++
		}
		t1 := time.Now()
		if err := renew(0, res.StopReason == cupti.StopCounterDataFull); err != nil {
			a.re++
			t.Fatalf("serial reset: %v", err)
		}
		a.reset += time.Since(t1)
	}
	report("(a) serial", a, time.Since(w0), processCPU()-cpu0)

	// (b) double: this thread decodes into a free image; an evaluator thread evaluates and
	// re-initialises the other.
	var b tally
	var mu sync.Mutex
	free := make(chan int, 2)
	free <- 0
	free <- 1
	type job struct {
		i    int
		full bool
	}
	jobs := make(chan job, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(done)
		for j := range jobs {
			i := j.i
			n, last, gaps, cost, err := evaluate(images[i], prevEnd)
			t1 := time.Now()
			rerr := renew(i, j.full)
			dr := time.Since(t1)
			mu.Lock()
			b.samples, b.gaps, b.eval, b.reset, prevEnd = b.samples+n, b.gaps+gaps, b.eval+cost, b.reset+dr, last
			if err != nil {
				b.evalErr++
				t.Errorf("evaluating on a second thread while the first decodes: %v", err)
			}
			if rerr != nil {
				b.re++
				t.Errorf("re-initialising an image on a second thread while the first decodes: %v", rerr)
			}
			mu.Unlock()
			free <- i
		}
	}()
	cpu0, w0 = processCPU(), time.Now()
	for time.Since(w0) < phase {
		time.Sleep(period)
		i := <-free
		t0 := time.Now()
		res, err := s.Decode(images[i])
		mu.Lock()
		b.decode += time.Since(t0)
		if err != nil {
			b.decodeErr++
			t.Errorf("decoding while a second thread evaluates: %v", err)
		}
		if res.StopReason == cupti.StopCounterDataFull {
			b.full++
		}
		mu.Unlock()
		if err != nil {
			free <- i
			continue
		}
		jobs <- job{i, res.StopReason == cupti.StopCounterDataFull}
	}
	close(jobs)
	<-done
	report("(b) double", b, time.Since(w0), processCPU()-cpu0)

	// (c) one image, its samples evaluated by 1, 2 and 4 threads over disjoint ranges.
	time.Sleep(period)
	if _, err := s.Decode(images[0]); err != nil {
		t.Fatalf("decode for (c): %v", err)
	}
	info, err := images[0].Info()
	if err != nil {
		t.Fatal(err)
	}
	n := info.Completed
	want := make([]float64, n*len(metrics))
	for _, threads := range []int{1, 2, 4} {
		got := make([]float64, n*len(metrics))
		var wg sync.WaitGroup
		var errs sync.Map
		t0 := time.Now()
		for w := range threads {
			wg.Go(func() {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				for i := w * n / threads; i < (w+1)*n/threads; i++ {
					if err := h.Evaluate(images[0], i, got[i*len(metrics):(i+1)*len(metrics)]); err != nil {
						errs.Store(i, err)
					}
				}
			})
		}
		wg.Wait()
		dt := time.Since(t0)
		errs.Range(func(k, v any) bool {
			t.Errorf("(c) %d threads: evaluating sample %v: %v", threads, k, v)
			return false
		})
		if threads == 1 {
			copy(want, got)
		} else {
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("(c) %d threads: value %d of sample %d = %v, one thread gave %v", threads, i%len(metrics), i/len(metrics), got[i], want[i])
					break
				}
			}
		}
		t.Logf("(c) %d samples evaluated on %d threads in %v: %.1f us per sample of wall time", n, threads, dt, dt.Seconds()*1e6/float64(max(n, 1)))
	}
}

// processCPU is the CPU time of the whole process (every thread), from /proc/self/stat.
func processCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after the last ')'.
	i := len(b) - 1
	for i > 0 && b[i] != ')' {
		i--
	}
	var fields []string
	start := -1
	for j := i + 2; j <= len(b); j++ {
		if j == len(b) || b[j] == ' ' {
			if start >= 0 {
				fields = append(fields, string(b[start:j]))
			}
			start = -1
		} else if start < 0 {
			start = j
		}
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after the command.
	if len(fields) < 13 {
		return 0
	}
	var ticks int64
	for _, f := range fields[11:13] {
		var v int64
		for _, c := range f {
			v = v*10 + int64(c-'0')
		}
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}
