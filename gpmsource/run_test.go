package gpmsource

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// TestRunWaitsForAKick: while PM sampling serves every GPU, Run does not wake every interval to
// read nothing (about 10 wake-ups a second of the process's, issue 32 item 5); a Kick (PM
// sampling's state changed) makes it read the GPU that now wants GPM at once, then every
// interval. The recheck is an hour here, so only the Kick can start the reads.
func TestRunWaitsForAKick(t *testing.T) {
	f := newFakeNVML(t, loadTrace(t, traceFile), 2)
	m, _ := mapping.New()
	pm := newPMSide(t, f, m, time.Second)
	var looks atomic.Int64 // calls of the PM status: a fixed number a collection
	status := func() []pmdata.DeviceStatus { looks.Add(1); return pm.status() }
	s, err := New(f, m, nil, WithPMDevices(func() []pmdata.Device { return pm.devices }), WithPMStatus(status),
		WithInterval(MinInterval), withRecheck(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	testutil.RunUntilCleanup(t, s.Run)
	takes := func(gpu int) int {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.takes[gpu]
	}
	waitFor(t, "the first collection", func() bool { return looks.Load() > 0 })
	time.Sleep(50 * time.Millisecond) // let it finish
	first := looks.Load()
	time.Sleep(5 * MinInterval)
	if n := looks.Load(); n != first {
		t.Errorf("every GPU sampled by PM sampling: want no collection after the first in %s, got %d more looks at PM's state", 5*MinInterval, n-first)
	}
	if n := takes(0) + takes(1); n != 0 {
		t.Errorf("every GPU sampled by PM sampling: want no GPM sample, got %d", n)
	}

	pm.set(1, pmdata.StatePaused)
	s.Kick()
	waitFor(t, "a GPM sample of GPU 1 after the kick", func() bool { return takes(1) > 0 })
	waitFor(t, "GPU 1 read every interval", func() bool { return takes(1) >= 3 })
	if n := takes(0); n != 0 {
		t.Errorf("GPU 0 still sampled by PM sampling: want no GPM sample, got %d", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 10*time.Second, 5*time.Millisecond, cond)
}
