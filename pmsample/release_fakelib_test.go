//go:build cgo

package pmsample

import (
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

// Against the fake libcupti: an idle release lets go of the session (as a pause does) while
// the other device samples on, and Reacquire takes it back.
func TestSamplerFakeLibIdleRelease(t *testing.T) {
	r := runFake(t, "")
	eventually(t, "sampling", func() bool { return r.c.sum(0, samplesOf) > 0 && r.c.sum(1, samplesOf) > 0 })
	r.s.Release(0, "idle for 5s")
	eventually(t, "one session released", func() bool {
		return cuptitest.Query(t, "sessions") == 1 && r.s.Status()[0].State == StateIdle
	})
	if st := r.s.Status(); !st[0].Ready || st[1].State != StateSampling {
		t.Fatalf("status = %+v", st)
	}
	r.s.Reacquire(0, time.Now())
	eventually(t, "session retaken", func() bool {
		return cuptitest.Query(t, "sessions") == 2 && r.s.Status()[0].State == StateSampling
	})
	if is := r.s.IdleStats()[0]; is.Releases != 1 || is.Reacquires != 1 || is.ReleasedSeconds <= 0 {
		t.Fatalf("idle stats = %+v", is)
	}
}
