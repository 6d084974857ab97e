//go:build cgo

package idle

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// The real sampler over the fake libcupti (2 devices), driven by a running Controller on a
// mocked NVML: release after the delay, reacquire on an NVML change within a few polls,
// counters and states as the exporter reports them.
func TestControllerWithSamplerFakeLib(t *testing.T) {
	lib, err := cupti.Open(cuptitest.Build(t))
	if err != nil {
		t.Fatalf("opening the fake libcupti: %v", err)
	}
	t.Cleanup(func() { _ = lib.Close() })
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := pmsample.New(lib, m, nil, pmsample.WithMetrics("sm__cycles_active.sum", "dram__bytes_read.sum"),
		pmsample.WithInterval(time.Millisecond), pmsample.WithDecodePeriod(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	gpus := map[string]*fakeGPU{}
	var fg []*fakeGPU
	for _, d := range s.Devices() {
		g := &fakeGPU{}
		g.events.Store(clockEventGPUIdle)
		gpus[d.UUID] = g
		fg = append(fg, g)
	}
	fg[1].util.Store(50) // device 1 is busy and must keep sampling
	c := New(s, fakeNVML(gpus), slog.New(slog.DiscardHandler), WithAfter(150*time.Millisecond), WithPoll(5*time.Millisecond))
	agg := aggregate.New(m, s.Devices(), s.Catalog(), nil, aggregate.WithStatus(s.Status))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = s.Run(ctx, func(b pmdata.Batch) { agg.Add(b); c.Add(b) }); done <- struct{}{} }()
	go func() { _ = c.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })

	waitFor(t, "device 0 idle-released", func() bool { return s.Status()[0].State == pmdata.StateIdle })
	if st := s.Status(); !st[0].Ready || st[1].State != pmdata.StateSampling {
		t.Fatalf("status = %+v", st)
	}
	if n := cuptitest.Query(t, "sessions"); n != 1 {
		t.Fatalf("%d sessions with device 0 released, want 1", n)
	}
	time.Sleep(50 * time.Millisecond)
	t0 := time.Now()
	fg[0].util.Store(10)
	waitFor(t, "device 0 sampling again", func() bool { return s.Status()[0].State == pmdata.StateSampling })
	if d := time.Since(t0); d > 100*time.Millisecond {
		t.Errorf("reacquire took %v with a 5 ms poll", d)
	}
	waitFor(t, "missed time counted", func() bool { return s.IdleStats()[0].MissedSeconds > 0 })
	is := s.IdleStats()[0]
	if is.Releases != 1 || is.Reacquires != 1 || is.ReleasedSeconds < 0.05 || is.MissedSeconds > 1 {
		t.Fatalf("idle stats = %+v", is)
	}
	if s.IdleStats()[1].Releases != 0 {
		t.Fatal("busy device 1 was released")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 5*time.Second, time.Millisecond, cond)
}
