package cupti_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

var testMetrics = []string{"sys__cycles_elapsed.avg.per_second", "gr__cycles_active.sum.pct_of_peak_sustained_elapsed",
	"sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}

const iv = 1_000_000 // 1 ms

// enableConfigured enables PM sampling on dev and builds a config image for metrics (default
// testMetrics); it tries SetConfig with default settings and leaves the session disabled at the
// end of the test. A SetConfig error fails the test unless metrics is nil and the error is
// a FeatureError (the caller checks those).
func enableConfigured(t *testing.T, l *cupti.Lib, dev int, metrics []string) (*cupti.Session, *cupti.ConfigImage) {
	t.Helper()
	if metrics == nil {
		metrics = testMetrics
	}
	chip, err := l.ChipName(dev)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHost(chip, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	img, err := h.ConfigImage(metrics)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(img.Free)
	s, err := l.Enable(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Disable() })
	if err := s.SetConfig(img, cupti.SetConfig{HardwareBufferSize: 64 << 20, Interval: iv, Trigger: cupti.TriggerGPUTime}); err != nil {
		t.Fatalf("SetConfig: %v", err)
	}
	return s, img
}

func fakeValue(j, k int) float64 { return float64(10*(j+1) + k%10) }

// checkSamples asserts the decoded samples are k0, k0+1, ... with the fake's values and times.
func checkSamples(t *testing.T, h *cupti.Host, cd *cupti.CounterData, t0 uint64, k0, n int) {
	t.Helper()
	info, err := cd.Info()
	if err != nil || info.Completed != n || info.Populated != n {
		t.Fatalf("Info = %+v, %v; want %d completed", info, err, n)
	}
	out := make([]float64, len(cd.Metrics()))
	for i := 0; i < n; i++ {
		k := k0 + i
		start, end, err := cd.SampleTimes(i)
		if err != nil {
			t.Fatal(err)
		}
		if start != t0+uint64(k)*iv || end != start+iv {
			t.Errorf("sample %d: [%d, %d], want start t0+%d*iv", k, start, end, k)
		}
		if err := h.Evaluate(cd, i, out); err != nil {
			t.Fatal(err)
		}
		for j, v := range out {
			if v != fakeValue(j, k) {
				t.Errorf("sample %d metric %d = %v, want %v", k, j, v, fakeValue(j, k))
			}
		}
	}
}

func TestPMSamplingCycle(t *testing.T) {
	cuptitest.Inject(t, "samples_per_decode=5")
	l := open(t)
	h := newHost(t, l)
	s, img := enableConfigured(t, l, 0, nil)
	if got := cuptitest.Query(t, "setconfig.interval"); got != iv {
		t.Errorf("interval sent = %d", got)
	}
	if cuptitest.Query(t, "setconfig.trigger") != 1 || cuptitest.Query(t, "setconfig.hwbuf") != 64<<20 ||
		cuptitest.Query(t, "setconfig.append") != 0 {
		t.Error("SetConfig parameters did not reach CUPTI")
	}
	img.Free() // the session keeps its own reference until Disable

	cd, err := s.NewCounterData(testMetrics, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Free()
	if cd.Size() == 0 {
		t.Fatal("empty counter data image")
	}
	before, _ := l.Timestamp()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	after, _ := l.Timestamp()
	if err := s.Start(); !errors.Is(err, cupti.ErrInvalidOperation) {
		t.Errorf("second Start = %v", err)
	}

	res, err := s.Decode(cd)
	if err != nil || res != (cupti.DecodeResult{StopReason: cupti.StopOther}) {
		t.Fatalf("Decode = %+v, %v", res, err)
	}
	start0, _, _ := cd.SampleTimes(0)
	if start0 < before || start0 > after {
		t.Errorf("sample 0 starts at %d, outside Start's [%d, %d]", start0, before, after)
	}
	checkSamples(t, h, cd, start0, 0, 5)
	// The two calls made once a sample allocate nothing (their params were 2 heap objects a
	// sample, and Evaluate pinned its output: issue 32's sample path).
	out := make([]float64, 3)
	if n := testing.AllocsPerRun(100, func() {
		if _, _, err := cd.SampleTimes(1); err != nil {
			t.Fatal(err)
		}
		if err := h.Evaluate(cd, 1, out); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("SampleTimes and Evaluate: %v allocations a sample, want 0", n)
	}
	if err := h.Evaluate(cd, 5, make([]float64, 3)); err == nil {
		t.Error("Evaluate past the completed samples succeeded")
	}
	if err := h.Evaluate(cd, 0, make([]float64, 2)); err == nil {
		t.Error("Evaluate with a short output succeeded")
	}

	// The image holds 8: the next decode fills it (reason 1) and leaves 2 behind.
	res, err = s.Decode(cd)
	if err != nil || res.StopReason != cupti.StopCounterDataFull {
		t.Fatalf("Decode into a full image = %+v, %v", res, err)
	}
	// As on the H200: an image that stopped a decode full cannot be re-initialised (999).
	if err := cd.Reset(); err == nil {
		t.Fatal("Reset after a full decode succeeded; the real library returns 999")
	}
	cd2, err := s.NewCounterData(testMetrics, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer cd2.Free()
	if info, _ := cd2.Info(); info.Completed != 0 || info.Total != 8 {
		t.Errorf("fresh image: %+v", info)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	res, err = s.Decode(cd2)
	if err != nil || res.StopReason != cupti.StopEndOfRecords {
		t.Fatalf("drain after Stop = %+v, %v", res, err)
	}
	if err := s.Disable(); err != nil {
		t.Fatal(err)
	}
	if cuptitest.Query(t, "sessions") != 0 {
		t.Error("session still enabled after Disable")
	}
	if _, err := s.Decode(cd); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("Decode after Disable = %v", err)
	}
}

func TestPMSamplingTimeBased(t *testing.T) {
	l := open(t)
	h := newHost(t, l)
	s, _ := enableConfigured(t, l, 0, nil)
	cd, err := s.NewCounterData(testMetrics, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Free()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if _, err := s.Decode(cd); err != nil {
		t.Fatal(err)
	}
	info, _ := cd.Info()
	if info.Completed < 20 || info.Completed > 1000 {
		t.Fatalf("%d samples after 30 ms at 1 ms", info.Completed)
	}
	start0, _, _ := cd.SampleTimes(0)
	checkSamples(t, h, cd, start0, 0, info.Completed)
	now, _ := l.Timestamp()
	if _, end, _ := cd.SampleTimes(info.Completed - 1); end > now {
		t.Errorf("sample ends in the future: %d > %d", end, now)
	}
}

func TestDoubleEnable(t *testing.T) {
	l := open(t)
	s, err := l.Enable(1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disable()
	_, err = l.Enable(1)
	if !errors.Is(err, cupti.ErrInvalidOperation) || !strings.Contains(err.Error(), "cuptiPmSamplingEnable") {
		t.Errorf("second Enable = %v", err)
	}
}

func TestMultiPassRejected(t *testing.T) {
	l := open(t)
	h := newHost(t, l)
	img, err := h.ConfigImage([]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed"})
	if err != nil {
		t.Fatal(err)
	}
	defer img.Free()
	s, err := l.Enable(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disable()
	err = s.SetConfig(img, cupti.SetConfig{HardwareBufferSize: 64 << 20, Interval: iv, Trigger: cupti.TriggerGPUTime})
	if !errors.Is(err, cupti.ErrNotSupported) || !strings.Contains(err.Error(), "cuptiPmSamplingSetConfig: CUPTI_ERROR_NOT_SUPPORTED (27)") {
		t.Errorf("SetConfig(19 passes) = %v", err)
	}
}

func TestFaultBusy(t *testing.T) {
	l := open(t)
	h := newHost(t, l)
	img, err := h.ConfigImage(testMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Free()
	s, err := l.Enable(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disable()
	cfg := cupti.SetConfig{HardwareBufferSize: 64 << 20, Interval: iv, Trigger: cupti.TriggerGPUTime}

	cuptitest.Inject(t, "busy_setconfig")
	err = s.SetConfig(img, cfg)
	if !errors.Is(err, cupti.ErrHardwareBusy) ||
		!strings.HasPrefix(err.Error(), "device 0: cuptiPmSamplingSetConfig: CUPTI_ERROR_HARDWARE_BUSY (26)") ||
		!strings.Contains(err.Error(), "another profiler") {
		t.Errorf("SetConfig while busy = %v", err)
	}
	if _, err := l.CounterAvailability(0); !errors.Is(err, cupti.ErrHardwareBusy) {
		t.Errorf("CounterAvailability while busy = %v", err)
	}
	cuptitest.SetFaults(t, "") // the other profiler went away
	if err := s.SetConfig(img, cfg); err != nil {
		t.Errorf("SetConfig after busy cleared = %v", err)
	}

	cuptitest.SetFaults(t, "busy_once")
	if err := s.SetConfig(img, cfg); !errors.Is(err, cupti.ErrHardwareBusy) {
		t.Errorf("first SetConfig with busy_once = %v", err)
	}
	if err := s.SetConfig(img, cfg); err != nil {
		t.Errorf("second SetConfig with busy_once = %v", err)
	}
}

func TestFaultOverflow(t *testing.T) {
	cuptitest.Inject(t, "overflow_at=2,samples_per_decode=3")
	l := open(t)
	for round := 0; round < 2; round++ {
		s, _ := enableConfigured(t, l, 0, nil)
		cd, err := s.NewCounterData(testMetrics, 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decode(cd); err != nil {
			t.Fatalf("round %d decode 1: %v", round, err)
		}
		for i := 2; i <= 3; i++ {
			res, err := s.Decode(cd)
			if !errors.Is(err, cupti.ErrOutOfMemory) || !res.Overflow {
				t.Errorf("round %d decode %d = %+v, %v; want overflow", round, i, res, err)
			}
		}
		s.Stop()
		if res, err := s.Decode(cd); !errors.Is(err, cupti.ErrOutOfMemory) || !res.Overflow {
			t.Errorf("decode after Stop = %+v, %v; the session stays dead", res, err)
		}
		cd.Free()
		// Recreating the session (Disable, Enable, SetConfig) clears the overflow.
		if err := s.Disable(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFaultImageFull(t *testing.T) {
	cuptitest.Inject(t, "image_full,samples_per_decode=10")
	l := open(t)
	s, _ := enableConfigured(t, l, 0, nil)
	cd, err := s.NewCounterData(testMetrics, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Free()
	s.Start()
	res, err := s.Decode(cd)
	if err != nil || res.StopReason != cupti.StopCounterDataFull {
		t.Fatalf("Decode = %+v, %v", res, err)
	}
	if info, _ := cd.Info(); info.Completed != 4 {
		t.Errorf("Info = %+v", info)
	}
}

func TestFaultInsufficientPrivileges(t *testing.T) {
	cuptitest.Inject(t, "insufficient_privileges")
	l := open(t)
	_, err := l.Enable(0)
	if !errors.Is(err, cupti.ErrInsufficientPrivileges) || !strings.Contains(err.Error(), "CAP_SYS_ADMIN") ||
		!strings.Contains(err.Error(), "cuptiPmSamplingEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (35)") {
		t.Errorf("Enable = %v", err)
	}
}

func TestFaultFirstSampleBeforeStart(t *testing.T) {
	cuptitest.Inject(t, "first_sample_before_start,samples_per_decode=2")
	l := open(t)
	s, _ := enableConfigured(t, l, 0, nil)
	cd, err := s.NewCounterData(testMetrics, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Free()
	before, _ := l.Timestamp()
	s.Start()
	if _, err := s.Decode(cd); err != nil {
		t.Fatal(err)
	}
	start0, end0, _ := cd.SampleTimes(0)
	start1, _, _ := cd.SampleTimes(1)
	if start0 >= before || end0-start0 != 400_000_000+iv || start1 != end0 {
		t.Errorf("sample 0 [%d, %d], sample 1 starts %d, Start at ~%d: want sample 0 to begin 0.4 s early",
			start0, end0, start1, before)
	}
}

func TestClosedHandles(t *testing.T) {
	l := open(t)
	s, img := enableConfigured(t, l, 0, nil)
	cd, err := s.NewCounterData(testMetrics, 2)
	if err != nil {
		t.Fatal(err)
	}
	cd.Free()
	cd.Free()
	if _, err := s.Decode(cd); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("Decode into a freed image = %v", err)
	}
	if _, err := cd.Info(); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("Info of a freed image = %v", err)
	}
	img.Free()
	if err := s.SetConfig(img, cupti.SetConfig{HardwareBufferSize: 1 << 20, Interval: iv}); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("SetConfig with a freed image = %v", err)
	}
}
