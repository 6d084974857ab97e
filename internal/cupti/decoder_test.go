package cupti_test

import (
	"errors"
	"runtime"
	"syscall"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

// startedDecoder enables a configured session on device 0, an image of capacity samples and a
// Decoder for it, and starts sampling; all are released at the end of the test.
func startedDecoder(t *testing.T, capacity int) (*cupti.Session, *cupti.Host, *cupti.CounterData, *cupti.Decoder) {
	t.Helper()
	l := open(t)
	h := newHost(t, l)
	s, _ := enableConfigured(t, l, 0, nil)
	cd, err := s.NewCounterData(testMetrics, capacity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cd.Free)
	dec, err := s.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.Close)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s, h, cd, dec
}

// TestDecoderBatch checks that a Decoder's batch does what the calls one by one do (the same
// samples, times and values, the image re-initialised), on a thread other than the caller's,
// skips the first sample's evaluation when asked, leaves a full image for the caller to
// replace, and reports CUPTI's errors in the batch.
func TestDecoderBatch(t *testing.T) {
	cuptitest.Inject(t, "samples_per_decode=5")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s, h, cd, dec := startedDecoder(t, 8)
	b, err := dec.Run(s, cd, h, false)
	if err != nil {
		t.Fatal(err)
	}
	if b.DecodeErr != nil || b.InfoErr != nil || b.ResetErr != nil || b.Decode != (cupti.DecodeResult{StopReason: cupti.StopOther}) {
		t.Fatalf("batch: %+v", b)
	}
	if b.Info.Completed != 5 || b.Samples != 5 || !b.Reset {
		t.Fatalf("batch: %d completed, %d read, reset %v; want 5, 5, true", b.Info.Completed, b.Samples, b.Reset)
	}
	if b.DecodeTime <= 0 || b.SampleInfo <= 0 || b.Evaluate <= 0 || b.ResetTime <= 0 {
		t.Errorf("call times %v %v %v %v, want each above 0", b.DecodeTime, b.SampleInfo, b.Evaluate, b.ResetTime)
	}
	me := uint64(syscall.Gettid())
	if tid := cuptitest.Query(t, "decode.tid"); tid == me || tid == 0 {
		t.Errorf("the decode ran on thread %d, the caller's is %d: want another", tid, me)
	}
	if tid := cuptitest.Query(t, "evaluate.tid"); tid == me || tid == 0 {
		t.Errorf("the evaluation ran on thread %d, the caller's is %d: want another", tid, me)
	}
	start0, _, _, _, _ := b.Sample(0)
	for i := range b.Samples {
		start, end, vals, timesErr, evalErr := b.Sample(i)
		if timesErr != nil || evalErr != nil {
			t.Fatalf("sample %d: %v, %v", i, timesErr, evalErr)
		}
		if start != start0+uint64(i)*iv || end != start+iv {
			t.Errorf("sample %d: [%d, %d], want start %d", i, start, end, start0+uint64(i)*iv)
		}
		if len(vals) != len(testMetrics) {
			t.Fatalf("sample %d: %d values", i, len(vals))
		}
		for j, v := range vals {
			if v != fakeValue(j, i) {
				t.Errorf("sample %d metric %d = %v, want %v", i, j, v, fakeValue(j, i))
			}
		}
	}
	if dec.CPU() <= 0 {
		t.Errorf("the decoding thread's CPU = %v after a batch, want above 0", dec.CPU())
	}
	if info, _ := cd.Info(); info.Completed != 0 || info.Populated != 0 {
		t.Errorf("after the batch the image holds %+v, want it re-initialised", info)
	}

	// The next batch, its first sample the rest of a split one: read, not evaluated.
	b, err = dec.Run(s, cd, h, true)
	if err != nil || b.Samples != 5 {
		t.Fatalf("second batch: %+v, %v", b, err)
	}
	if start, _, vals, timesErr, evalErr := b.Sample(0); start == 0 || vals != nil || timesErr != nil || evalErr != nil {
		t.Errorf("skipped first sample: start %d, values %v, errors %v %v; want its times and no values", start, vals, timesErr, evalErr)
	}
	if _, _, vals, _, _ := b.Sample(1); len(vals) != len(testMetrics) || vals[0] != fakeValue(0, 6) {
		t.Errorf("second batch's sample 1: %v, want the fake's sample 6", vals)
	}

	// A batch that fills the image leaves it as it is (the real library refuses to
	// re-initialise it): the caller replaces it.
	small, err := s.NewCounterData(testMetrics, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	b, err = dec.Run(s, small, h, false)
	if err != nil || b.Decode.StopReason != cupti.StopCounterDataFull || b.Reset || b.Samples != 3 {
		t.Fatalf("batch into a 3-sample image: %+v, %v; want full, not reset, 3 samples", b, err)
	}

	if err := s.Disable(); err != nil {
		t.Fatal(err)
	}
	if _, err := dec.Run(s, cd, h, false); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("Run on a disabled session = %v, want ErrClosed", err)
	}
	dec.Close()
	dec.Close() // idempotent
	if dec.CPU() != 0 {
		t.Errorf("CPU after Close = %v, want 0", dec.CPU())
	}
	if _, err := dec.Run(s, cd, h, false); !errors.Is(err, cupti.ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
}

// TestDecoderOverflow checks that an overflowed decode stops the batch there and says so.
func TestDecoderOverflow(t *testing.T) {
	cuptitest.Inject(t, "overflow_at=2,samples_per_decode=3")
	s, h, cd, dec := startedDecoder(t, 16)
	if b, err := dec.Run(s, cd, h, false); err != nil || b.DecodeErr != nil || b.Samples != 3 {
		t.Fatalf("first batch: %+v, %v", b, err)
	}
	b, err := dec.Run(s, cd, h, false)
	if err != nil || !b.Decode.Overflow || !errors.Is(b.DecodeErr, cupti.ErrOutOfMemory) || b.Samples != 0 || b.Reset {
		t.Fatalf("overflowed batch: %+v, %v; want the overflow and nothing after it", b, err)
	}
}

// TestDecoderTakesCallerPriority: the decoding thread starts with its creator's nice value, so
// pmsample's raised sampling thread (docs/pm-sampling.md "Thread priority") raises it too.
func TestDecoderTakesCallerPriority(t *testing.T) {
	cuptitest.Inject(t, "samples_per_decode=2")
	// Locked and never unlocked: the thread, its priority lowered, ends with the test's goroutine.
	runtime.LockOSThread()
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 5); err != nil { // lowering needs no privilege
		t.Fatal(err)
	}
	s, h, cd, dec := startedDecoder(t, 4)
	if _, err := dec.Run(s, cd, h, false); err != nil {
		t.Fatal(err)
	}
	tid := int(cuptitest.Query(t, "decode.tid"))
	got, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid)
	if err != nil {
		t.Fatal(err)
	}
	if 20-got != 5 { // the raw system call answers 20 - nice
		t.Errorf("decoding thread %d at nice %d, want its creator's 5", tid, 20-got)
	}
}
