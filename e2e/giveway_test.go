package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/profilers/execevents"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// TestServeGivesWayToAProfiler: the real binary serving with the fake libcupti's host-wide
// counters (one session per GPU across processes, as on a GPU) gives its counters to a process
// named ncu when it starts, and takes them back when it exits (issue 32). The "ncu" is the
// binary itself under that name, recording: it gets the counters (a recording with samples)
// only if the serving exporter let go; before, it stayed busy and recorded none.
func TestServeGivesWayToAProfiler(t *testing.T) {
	lib, env := fakeCUPTI(t)
	dir := t.TempDir()
	env = append(env, "CUPTI_FAKE_HOST_DIR="+dir)
	p := startEnv(t, env, "serve", lib, fakeMetricsFlag, "--pmsample.decode-period=50ms", "--pmsample.give-way-poll=20ms",
		"--activity.socket="+filepath.Join(dir, "activity.sock"))
	waitFor(t, "samples of gpu 0", func() bool {
		_, fams := p.scrape(t)
		v, ok := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": "0"})
		return ok && v > 10
	})

	ncu := filepath.Join(dir, "ncu")
	if err := os.Symlink(binary, ncu); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "profiled.cuptirec")
	cmd := exec.Command(ncu, "record", lib, fakeMetricsFlag, "--no-activity.enabled", "--no-health.enabled", "--output="+file, "--duration=2s")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	exited := time.Now()
	if err != nil {
		t.Fatalf("the profiler (record named ncu): %v\n%s", err, out)
	}
	if n := recordedSamples(t, file, 0); n == 0 {
		t.Fatalf("the profiler recorded no sample on GPU 0: the exporter kept the counters\n%s", out)
	}

	waitFor(t, "samples again after the profiler", func() bool {
		_, fams := p.scrape(t)
		v, ok := series(fams, "cupti_pm_sampling_state", map[string]string{"gpu": "0", "state": "sampling"})
		return ok && v == 1 && strings.Count(p.out.String(), "pm sampling resumed after a profiler") == 2
	})
	if d := time.Since(exited); d > 5*time.Second {
		t.Errorf("samples again %v after the profiler exited", d)
	}
	_, fams := p.scrape(t)
	for _, gpu := range []string{"0", "1"} {
		if v, ok := series(fams, "cupti_pm_give_ways_total", map[string]string{"gpu": gpu, "tool": "ncu"}); !ok || v != 1 {
			t.Errorf("cupti_pm_give_ways_total{gpu=%s,tool=ncu} = %v (found %v), want 1", gpu, v, ok)
		}
		if v, ok := series(fams, "cupti_pm_lost_seconds_total", map[string]string{"gpu": gpu, "reason": "yielded"}); !ok || v <= 0 {
			t.Errorf("cupti_pm_lost_seconds_total{gpu=%s,reason=yielded} = %v (found %v), want the time given away", gpu, v, ok)
		}
	}
	// How the watch looked: at each exec where this host lets the exporter open perf events for
	// the whole host (as the test process can), else every poll.
	want := 0.0
	if src, err := execevents.Open(); err == nil {
		src.Close()
		want = 1
	}
	if v, ok := series(fams, "cupti_pm_give_way_exec_events", nil); !ok || v != want {
		t.Errorf("cupti_pm_give_way_exec_events = %v (found %v), want %v", v, ok, want)
	}
	log := p.out.String()
	for _, want := range []string{`msg="profiler found: giving it the gpu counters" logged_source=profilers tool=ncu`, "comm=ncu", "profiler gone", "pm sampling takes its counters back", "pm sampling resumed after a profiler"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q", want)
		}
	}
}

// recordedSamples counts the samples of a GPU in a recording.
func recordedSamples(t *testing.T, file string, gpu int) int {
	t.Helper()
	n := 0
	for _, ev := range recordedEvents(t, file) {
		if ev.Type == recording.FrameBatch && ev.Batch.Device == gpu {
			n += len(ev.Batch.Samples)
		}
	}
	return n
}
