package pmsample

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
)

// scriptPM is a pmDevice that produces 3 samples per decode and fails on cue.
type scriptPM struct {
	mu         sync.Mutex
	calls      []string
	busyLeft   int // SetConfig answers busy this many more times
	privLeft   int // SetConfig answers insufficient privileges this many more times
	overflowAt map[int]bool
	fullAt     map[int]bool
	decodes    int
	enabled    bool
	started    bool
	first      bool // the next decode yields a sample that began before Start
	firstNaN   bool // and that sample's values are NaN (as CUPTI gave once on an H100)
	clock      uint64
	startTS    uint64
	// The H200's behaviour in run M: a Start after a Stop in the same session succeeds and
	// yields no sample ever after (restartDead); deadFrom kills the session at that decode.
	restartDead bool
	deadFrom    int
	stopped     bool // Stop was called since Enable
	dead        bool // this session yields no samples until Disable
}

func newScriptPM() *scriptPM {
	return &scriptPM{clock: 1795299125930175064, overflowAt: map[int]bool{}, fullAt: map[int]bool{}}
}

func (p *scriptPM) record(c string) { p.calls = append(p.calls, c) }

func (p *scriptPM) Enable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("Enable")
	if p.enabled {
		return fmt.Errorf("enable: %w", cupti.ErrInvalidOperation)
	}
	p.enabled, p.stopped, p.dead = true, false, false
	return nil
}

func (p *scriptPM) SetConfig(g int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record(fmt.Sprintf("SetConfig(%d)", g))
	switch {
	case p.busyLeft > 0:
		p.busyLeft--
		return fmt.Errorf("configuring: CUPTI_ERROR_HARDWARE_BUSY: %w", errBusy)
	case p.privLeft > 0:
		p.privLeft--
		return fmt.Errorf("configuring: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: %w", errPrivileges)
	}
	return nil
}

func (p *scriptPM) Start() (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("Start")
	p.clock += 1e6
	p.startTS, p.started, p.first = p.clock, true, true
	p.dead = p.dead || (p.restartDead && p.stopped)
	return p.startTS, nil
}

func (p *scriptPM) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("Stop")
	p.started, p.stopped = false, true
	return nil
}

func (p *scriptPM) Disable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.record("Disable")
	p.enabled, p.started = false, false
	return nil
}

func (p *scriptPM) Decode(g int, fn func(start, end uint64, values []float64)) (cupti.DecodeResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.decodes++
	if p.overflowAt[p.decodes] {
		return cupti.DecodeResult{Overflow: true}, fmt.Errorf("decoding: %w", errOverflow)
	}
	if !p.started {
		return cupti.DecodeResult{StopReason: cupti.StopEndOfRecords}, nil
	}
	if p.deadFrom > 0 && p.decodes >= p.deadFrom { // once: the next session works
		p.dead, p.deadFrom = true, 0
	}
	if p.dead {
		p.clock += 3e6 // time passes, and nothing comes
		return cupti.DecodeResult{StopReason: cupti.StopOther}, nil
	}
	vals := []float64{float64(g + 1)}
	if p.first {
		p.first = false
		fv := vals
		if p.firstNaN {
			fv = []float64{math.NaN()}
		}
		fn(p.startTS-300e6, p.startTS+1e6, fv)
		p.clock += 1e6
	}
	for range 3 {
		fn(p.clock, p.clock+1e6, vals)
		p.clock += 1e6
	}
	res := cupti.DecodeResult{StopReason: cupti.StopOther}
	if p.fullAt[p.decodes] {
		res.StopReason = cupti.StopCounterDataFull
	}
	return res, nil
}

func (p *scriptPM) Close() {}

// now is the script's clock, on which its samples are stamped.
func (p *scriptPM) now() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clock
}

func (p *scriptPM) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

func (p *scriptPM) set(f func(*scriptPM)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func newTestSampler(t *testing.T, pms []*scriptPM, groups []catalog.Group, opts ...Option) *Sampler {
	t.Helper()
	cfg, err := newConfig(append([]Option{WithInterval(time.Millisecond), WithDecodePeriod(5 * time.Millisecond), WithBackoff(5*time.Millisecond, 20*time.Millisecond), WithBusyPoll(5 * time.Millisecond), WithPrivilegeRetry(10 * time.Millisecond)}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	s := &Sampler{cfg: cfg, logger: slog.New(slog.DiscardHandler)}
	for i, pm := range pms {
		s.runners = append(s.runners, newRunner(s, pmdata.Device{Index: i, UUID: fmt.Sprintf("GPU-%d", i)}, pm, groups))
	}
	return s
}

// collector records batches.
type collector struct {
	mu      sync.Mutex
	batches []pmdata.Batch
}

func (c *collector) add(b pmdata.Batch) { c.mu.Lock(); c.batches = append(c.batches, b); c.mu.Unlock() }

func (c *collector) sum(dev int, f func(pmdata.Batch) int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range c.batches {
		if b.Device == dev {
			n += f(b)
		}
	}
	return n
}

func samplesOf(b pmdata.Batch) int { return len(b.Samples) }

// start runs s until the test ends and returns the collector.
func start(t *testing.T, s *Sampler) *collector {
	t.Helper()
	c := &collector{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx, c.add); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 5*time.Second, 2*time.Millisecond, cond)
}

var oneGroup = []catalog.Group{{Metrics: []string{pmtest.SM}}}

func TestSamplerDropsFirstSample(t *testing.T) {
	for _, nan := range []bool{false, true} {
		t.Run(fmt.Sprintf("nan=%v", nan), func(t *testing.T) { testDropsFirstSample(t, nan) })
	}
}

// testDropsFirstSample: the sample that began before Start is dropped as the first one,
// also where its values are NaN (not counted invalid).
func testDropsFirstSample(t *testing.T, nan bool) {
	pm := newScriptPM()
	pm.firstNaN = nan
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	c := start(t, s)
	eventually(t, "30 samples", func() bool { return c.sum(0, samplesOf) >= 30 })
	if n := c.sum(0, func(b pmdata.Batch) int { return b.DroppedFirst }); n != 1 {
		t.Fatalf("dropped first = %d, want 1 (one Start)", n)
	}
	if n := c.sum(0, func(b pmdata.Batch) int { return b.SkippedInvalid }); n != 0 {
		t.Fatalf("invalid = %d, want 0 (the first sample is dropped for its start)", n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.batches {
		for _, smp := range b.Samples {
			if smp.Start < pm.startTS {
				t.Fatalf("sample starting %d before Start (%d) delivered", smp.Start, pm.startTS)
			}
		}
	}
	if st := s.Status()[0]; st.State != pmdata.StateSampling || !st.Ready {
		t.Fatalf("status = %+v, want sampling and ready", st)
	}
}

func TestSamplerOverflowRecreatesSession(t *testing.T) {
	pm := newScriptPM()
	pm.overflowAt[3] = true
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	c := start(t, s)
	eventually(t, "samples after the overflow", func() bool {
		return c.sum(0, func(b pmdata.Batch) int { return b.Overflows }) == 1 && c.sum(0, func(b pmdata.Batch) int { return b.DroppedFirst }) == 2
	})
	log := strings.Join(pm.log(), " ")
	if !strings.Contains(log, "Disable Enable SetConfig(0) Start") {
		t.Fatalf("calls %q lack the recreate sequence", log)
	}
}

func TestSamplerImageFullCounted(t *testing.T) {
	pm := newScriptPM()
	pm.fullAt[2] = true
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	c := start(t, s)
	eventually(t, "4 decodes", func() bool { return c.sum(0, func(pmdata.Batch) int { return 1 }) >= 4 })
	if n := c.sum(0, func(b pmdata.Batch) int { return b.LostImageFull }); n != 1 {
		t.Fatalf("image full = %d, want 1", n)
	}
	// CUPTI will not re-initialise an image after a full decode: the session is recreated.
	if log := strings.Join(pm.log(), " "); !strings.Contains(log, "Disable Enable SetConfig(0) Start") {
		t.Fatalf("calls %q lack the recreate sequence", log)
	}
}

func TestSamplerBusyThenRecovers(t *testing.T) {
	busy, free := newScriptPM(), newScriptPM()
	busy.busyLeft = 1 << 30
	s := newTestSampler(t, []*scriptPM{busy, free}, oneGroup)
	c := start(t, s)
	eventually(t, "device 0 busy while device 1 samples", func() bool {
		st := s.Status()
		return st[0].State == pmdata.StateBusy && c.sum(1, samplesOf) > 10
	})
	if st := s.Status()[0]; st.Ready || !strings.Contains(st.Reason, "busy") {
		t.Fatalf("busy status = %+v, want not ready with a reason", st)
	}
	if c.sum(0, samplesOf) != 0 {
		t.Fatal("busy device delivered samples")
	}
	busy.set(func(p *scriptPM) { p.busyLeft = 0 })
	eventually(t, "device 0 sampling", func() bool { return s.Status()[0].State == pmdata.StateSampling && c.sum(0, samplesOf) > 0 })
	// Every failed attempt released the session before the next one.
	log := busy.log()
	for i, call := range log {
		if call == "Enable" && i > 0 && log[i-1] != "Disable" {
			t.Fatalf("Enable at %d not preceded by Disable: %v", i, log[:i+1])
		}
	}
}

func TestSamplerPrivilegesErrorThenRetry(t *testing.T) {
	pm := newScriptPM()
	pm.privLeft = 1 << 30
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	start(t, s)
	eventually(t, "state error", func() bool {
		return s.Status()[0].State == pmdata.StateError && strings.Contains(s.Status()[0].Reason, "CAP_PERFMON")
	})
	pm.set(func(p *scriptPM) { p.privLeft = 0 })
	eventually(t, "sampling after the retry", func() bool { return s.Status()[0].State == pmdata.StateSampling })
}

func TestSamplerPauseResumeHTTP(t *testing.T) {
	pm := newScriptPM()
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	c := start(t, s)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 })

	post := func(path string) (int, PauseResponse) {
		t.Helper()
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body PauseResponse
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("decoding %s answer: %v", path, err)
		}
		return resp.StatusCode, body
	}
	code, body := post("/api/v1/pm-sampling/pause")
	if code != http.StatusOK || len(body.Devices) != 1 || body.Devices[0].State != pmdata.StatePaused {
		t.Fatalf("pause: %d %+v", code, body)
	}
	if log := pm.log(); !pm.released() {
		t.Fatalf("counters not released after pause: %v", log)
	}
	samples := c.sum(0, samplesOf)
	time.Sleep(30 * time.Millisecond)
	if c.sum(0, samplesOf) != samples {
		t.Fatal("samples arrived while paused")
	}
	code, _ = post("/api/v1/pm-sampling/resume")
	if code != http.StatusOK {
		t.Fatalf("resume: %d", code)
	}
	eventually(t, "sampling after resume", func() bool { return c.sum(0, samplesOf) > samples })

	// A timed pause resumes by itself.
	code, body = post("/api/v1/pm-sampling/pause?duration=50ms")
	if code != http.StatusOK || body.Devices[0].PausedUntil.IsZero() {
		t.Fatalf("timed pause: %d %+v", code, body)
	}
	eventually(t, "automatic resume", func() bool { return s.Status()[0].State == pmdata.StateSampling })

	if code, body = post("/api/v1/pm-sampling/pause?duration=soon"); code != http.StatusBadRequest || body.Error == "" {
		t.Fatalf("bad duration: %d %+v", code, body)
	}
	if code, body = post("/api/v1/pm-sampling/pause?duration=2500000h"); code != http.StatusBadRequest || !strings.Contains(body.Error, "24h0m0s") {
		t.Errorf("a pause of 285 years: %d %+v, want 400 naming the 24 h limit", code, body)
	}
	if resp, err := http.Get(srv.URL + "/api/v1/pm-sampling/pause"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET pause: %v %v", resp.StatusCode, err)
	}
}

func (p *scriptPM) released() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.enabled && !p.started
}

// Each turn is a new session: the device behaves as the H200 did, where a Start after a Stop
// in the same session yields nothing.
func TestSamplerMultiplexTakesTurns(t *testing.T) {
	pm := newScriptPM()
	pm.restartDead = true
	groups := []catalog.Group{{Metrics: []string{pmtest.SM}}, {Metrics: []string{pmtest.PCIeRx}}}
	s := newTestSampler(t, []*scriptPM{pm}, groups, WithMultiplex(15*time.Millisecond))
	c := start(t, s)
	// Both groups keep delivering, turn after turn (before, the second turn was silent).
	turns := func(m string) int {
		c.mu.Lock()
		defer c.mu.Unlock()
		n, prev := 0, ""
		for _, b := range c.batches {
			if len(b.Samples) > 0 && b.Metrics[0] != prev {
				prev = b.Metrics[0]
				n += b2i(prev == m)
			}
		}
		return n
	}
	eventually(t, "three turns of each group", func() bool { return turns(pmtest.SM) >= 3 && turns(pmtest.PCIeRx) >= 3 })
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.batches {
		if !b.Multiplexed {
			t.Fatal("batch of a multiplexed group not marked")
		}
		want := 1.0
		if b.Metrics[0] == pmtest.PCIeRx {
			want = 2
		}
		for _, smp := range b.Samples {
			if smp.Values[0] != want {
				t.Fatalf("group %v got a value of the other group", b.Metrics)
			}
		}
		for _, l := range b.Lost {
			if l.Reason == "stall" {
				t.Fatalf("a turn stalled: %+v", l)
			}
		}
	}
	if log := strings.Join(pm.log(), " "); !strings.Contains(log, "Stop Disable Enable SetConfig(1) Start") {
		t.Fatalf("calls %q lack a group switch in a new session", log)
	}
}

// A session that goes silent is recreated, and the silent time is lost time with reason
// "stall" (before, it was not counted at all: 58 s a minute in run M).
func TestSamplerStallRecreatesSession(t *testing.T) {
	pm := newScriptPM()
	pm.deadFrom = 5
	s := newTestSampler(t, []*scriptPM{pm}, []catalog.Group{{Metrics: []string{pmtest.SM}}})
	s.cfg.stallFloor = 30 * time.Millisecond
	c := start(t, s)
	stallNS := func() (ns float64) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, b := range c.batches {
			for _, l := range b.Lost {
				if l.Reason == "stall" {
					ns += float64(l.End - l.Start)
				}
			}
		}
		return ns
	}
	eventually(t, "a recreated session", func() bool { return strings.Count(strings.Join(pm.log(), " "), "Enable") >= 2 })
	before := c.sum(0, samplesOf)
	eventually(t, "samples after the stall", func() bool { return c.sum(0, samplesOf) > before+10 })
	// The fake's clock moves 3 ms a silent decode; the stall is declared past 30 ms of silence.
	if ns := stallNS(); ns < 30e6 || ns > 60e6 {
		t.Fatalf("stall lost %.1f ms, want 30-60 ms", ns/1e6)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	c, err := newConfig([]Option{WithHardwareBuffer(1 << 20), WithInterval(-1)})
	if err != nil {
		t.Fatal(err)
	}
	if c.hardwareBuffer != 64<<20 || c.interval != time.Millisecond || c.decodePeriod != 250*time.Millisecond {
		t.Fatalf("config = %+v", c)
	}
	if n := c.maxSamples(); n != 366 {
		t.Fatalf("maxSamples = %d, want 366 (250 + 100 ms of room + 16)", n)
	}
	// Where none is given the decode period follows the interval: 100 ms below 1 ms, where a
	// longer one only holds more memory; else 250 ms, never shorter than the interval.
	for _, c := range []struct{ interval, given, want time.Duration }{
		{100 * time.Microsecond, 0, 100 * time.Millisecond},
		{500 * time.Microsecond, 0, 100 * time.Millisecond},
		{time.Millisecond, 0, 250 * time.Millisecond},
		{10 * time.Millisecond, 0, 250 * time.Millisecond},
		{time.Second, 0, time.Second},
		{100 * time.Microsecond, 50 * time.Millisecond, 50 * time.Millisecond},
		{time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
	} {
		if got := DecodePeriodFor(c.interval, c.given); got != c.want {
			t.Errorf("DecodePeriodFor(%v, %v) = %v, want %v", c.interval, c.given, got, c.want)
		}
		cfg, err := newConfig([]Option{WithInterval(c.interval), WithDecodePeriod(c.given)})
		if err != nil || cfg.decodePeriod != c.want {
			t.Errorf("newConfig at %v, decode period %v: %v, %v; want %v", c.interval, c.given, cfg.decodePeriod, err, c.want)
		}
		if errs := CheckTiming(c.interval, c.given); len(errs) != 0 {
			t.Errorf("CheckTiming(%v, %v) = %v", c.interval, c.given, errs)
		}
	}
	if errs := CheckTiming(time.Millisecond, -time.Second); len(errs) != 1 || !strings.Contains(errs[0].Error(), "pmsample.decode_period must be between 10ms and 10s, got -1s") {
		t.Errorf("a negative decode period: %v", errs)
	}
	for _, c := range []struct {
		period, interval time.Duration
		growth           float64
		want             int
	}{
		{100 * time.Millisecond, 100 * time.Microsecond, 0, 1000 + 250 + 16},        // room capped in slots: a quarter period
		{100 * time.Millisecond, 10 * time.Millisecond, 0, 10 + 10 + 16},            // 100 ms of room
		{time.Second, 100 * time.Microsecond, 0, 10000 + 2500 + 16},                 // a quarter period beats the cap
		{100 * time.Millisecond, time.Millisecond, maxGrowth, 100 + 100 + 125 + 16}, // fully grown
	} {
		if got := imageCapacity(c.period, c.interval, c.growth); got != c.want {
			t.Errorf("imageCapacity(%v, %v, %v) = %d, want %d", c.period, c.interval, c.growth, got, c.want)
		}
	}
	if _, err := newConfig([]Option{WithDecodePeriod(time.Microsecond)}); err == nil {
		t.Fatal("decode period below the interval accepted")
	}
	if _, err := newConfig([]Option{WithMetrics("a.sum"), WithMetricSet("x")}); err == nil {
		t.Fatal("metrics and a metric set accepted together")
	}
}

func TestConfigDutyCycle(t *testing.T) {
	c, err := newConfig([]Option{WithDutyCycle(0.7, 10*time.Second)})
	if err != nil || c.dutyOn != 7*time.Second || c.dutyOff != 3*time.Second {
		t.Fatalf("0.7 of 10s: on %v off %v, err %v", c.dutyOn, c.dutyOff, err)
	}
	if c, err := newConfig([]Option{WithDutyCycle(1, 10*time.Second)}); err != nil || c.dutyOff != 0 {
		t.Fatalf("a fraction of 1 must sample all the time: off %v, err %v", c.dutyOff, err)
	}
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithDutyCycle(0.5, 10*time.Second), WithMultiplex(time.Second)}, "cannot be combined"},
		{[]Option{WithDutyCycle(0.9, 2*time.Second)}, "200ms released: each phase must last at least 500ms"},
		{[]Option{WithDutyCycle(0.004, 100*time.Second)}, "400ms sampled and 1m39.6s released"},
		{[]Option{WithDutyCycle(0.2, 10*time.Second)}, ""},
		{[]Option{WithDutyCycle(0.5, 2*time.Second), WithDecodePeriod(time.Second)}, "shorter than two decode periods"},
	} {
		_, err := newConfig(tc.opts)
		if tc.want == "" {
			if err != nil {
				t.Errorf("refused: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want it to say %q", err, tc.want)
		}
	}
}
