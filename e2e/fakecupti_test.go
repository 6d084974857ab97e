package e2e

// The real binary against the fake libcupti (internal/cupti/fake): the live path of `serve`
// (sampler -> aggregator -> exporter, pause/resume through the web server), `record` and the
// `metrics` commands, which CI cannot otherwise reach without a GPU. The GPU machine checks the
// same paths against the real library (scripts/gpu/validate.sh).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// fakeCUPTI builds the fake libraries and returns the --cupti.library flag and the environment
// that lets the binary's dlopen("libcuda.so.1") find the fake driver.
func fakeCUPTI(t *testing.T) (flag string, env []string) {
	t.Helper()
	o := cuptitest.Build(t)
	return "--cupti.library=" + o.LibraryPath, []string{"LD_LIBRARY_PATH=" + filepath.Dir(o.CUDALibraryPath), "CUPTI_FAKE_DEVICES=2"}
}

const fakeMetricsFlag = "--pmsample.metrics=gr__cycles_active.sum,sm__cycles_active.avg.pct_of_peak_sustained_elapsed"

// series returns the value of the series of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 15*time.Second, 100*time.Millisecond, cond)
}

func post(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s, %v", url, resp.Status, err)
	}
	return v
}

func TestServeFakeCUPTI(t *testing.T) {
	lib, env := fakeCUPTI(t)
	p := startEnv(t, env, "serve", lib, fakeMetricsFlag, "--pmsample.decode-period=50ms", "--web.enable-pm-sampling-api",
		"--activity.socket="+filepath.Join(t.TempDir(), "activity.sock"))

	for _, gpu := range []string{"0", "1"} {
		waitFor(t, "samples of gpu "+gpu, func() bool {
			_, fams := p.scrape(t)
			v, ok := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": gpu, "chip": "GH100"})
			return ok && v > 10
		})
	}
	body, fams := p.scrape(t)
	lint(t, body)
	// Fake values: metric 0 of sample k is 10 + k%10 cycles, so the counter grows by 10..19 a sample.
	total, ok := series(fams, "cupti_gr_active_cycles_total", map[string]string{"gpu": "0"})
	samples, _ := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": "0"})
	if !ok || total < 10*samples || total > 19*samples+19 {
		t.Errorf("cupti_gr_active_cycles_total = %v (found %v) for %v samples, want 10..19 a sample", total, ok, samples)
	}
	if v, ok := series(fams, "cupti_pm_sampling_state", map[string]string{"gpu": "1", "state": "sampling"}); !ok || v != 1 {
		t.Errorf("gpu 1 sampling state = %v (found %v)", v, ok)
	}
	// Idle release is on by default (1m); without NVML here nothing is released, and its
	// counters are served (linted above) at 0.
	if v, ok := series(fams, "cupti_pm_idle_releases_total", map[string]string{"gpu": "0"}); !ok || v != 0 {
		t.Errorf("cupti_pm_idle_releases_total = %v (found %v), want 0", v, ok)
	}

	// Pause and resume through the same web server as /metrics.
	paused := post(t, "http://"+p.addr+"/api/v1/pm-sampling/pause?duration=1m")
	if !strings.Contains(mustJSON(t, paused), `"state":"paused"`) {
		t.Fatalf("pause answered %v", paused)
	}
	waitFor(t, "state paused in /metrics", func() bool {
		_, fams := p.scrape(t)
		v, ok := series(fams, "cupti_pm_sampling_state", map[string]string{"gpu": "0", "state": "paused"})
		return ok && v == 1
	})
	// Paused: alive (/healthz 200) but not sampling, which /readyz and source_up say (no
	// other source produces here: NVML is absent, so /readyz is 503).
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "source=pmsample device=0 not ready: paused on request until 20"} {
		resp, err := http.Get("http://" + p.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) || (path == "/healthz") != (resp.StatusCode == http.StatusOK) {
			t.Errorf("%s while paused: %s %q, want %q", path, resp.Status, body, want)
		}
	}
	_, fams = p.scrape(t)
	if v, ok := series(fams, "cupti_exporter_source_up", map[string]string{"source": "pmsample", "gpu": "0", "reason": "paused"}); !ok || v != 0 {
		t.Errorf("source_up of the paused GPU = %v (found %v), want 0 with reason paused", v, ok)
	}
	before, _ := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": "0"})
	post(t, "http://"+p.addr+"/api/v1/pm-sampling/resume")
	waitFor(t, "samples again after resume", func() bool {
		_, fams := p.scrape(t)
		v, _ := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": "0"})
		return v > before+10
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// run runs the binary to completion and returns its output and exit error.
func run(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(cmd.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func TestMetricsCommandsFakeCUPTI(t *testing.T) {
	lib, env := fakeCUPTI(t)
	out, err := run(t, env, "metrics", "list", lib, "--chip=GH100")
	if err != nil || !strings.Contains(out, "dram__bytes_read") {
		t.Errorf("metrics list: %v\n%.500s", err, out)
	}
	out, err = run(t, env, "metrics", "describe", lib, "--chip=GH100", "gr__cycles_active")
	if err != nil || !strings.Contains(out, "sys_cycle") {
		t.Errorf("metrics describe: %v\n%.500s", err, out)
	}
	out, err = run(t, env, "metrics", "plan", lib, "--chip=GH100", "gr__cycles_active.sum,sm__cycles_active.sum")
	if err != nil || !strings.Contains(out, "one pass") {
		t.Errorf("metrics plan: %v\n%.500s", err, out)
	}
	// A metric that alone needs 19 passes is refused, naming the problem.
	out, err = run(t, env, "metrics", "plan", lib, "--chip=GH100", "sm__throughput.avg.pct_of_peak_sustained_elapsed")
	if err == nil || !strings.Contains(out, "19") {
		t.Errorf("plan of a 19-pass metric: err %v\n%.500s", err, out)
	}
	// An unknown name gets suggestions.
	out, err = run(t, env, "metrics", "plan", lib, "--chip=GH100", "gr__cycles_activ.sum")
	if err == nil || !strings.Contains(out, "gr__cycles_active") {
		t.Errorf("plan of an unknown metric: err %v\n%.500s", err, out)
	}
	// Every chip the library supports, with its default set; one chip in detail; a capture.
	out, err = run(t, env, "metrics", "chips", lib)
	if err != nil || strings.Count(out, "\n") != 31 || !strings.Contains(out, "TU102  Turing") {
		t.Errorf("metrics chips: want a header and the 30 chips: %v\n%.800s", err, out)
	}
	dir := t.TempDir()
	out, err = run(t, env, "metrics", "chips", lib, "--chip=GA100", "--capture="+dir)
	if err != nil || !strings.Contains(out, "trigger") || !strings.Contains(out, "cupti_sm_active_ratio") {
		t.Errorf("metrics chips --chip GA100: %v\n%.800s", err, out)
	}
	for _, f := range []string{"GA100.tsv.gz", "GA100.passes"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("metrics chips --capture: %v", err)
		}
	}
}

func TestRecordReplayFakeCUPTI(t *testing.T) {
	lib, env := fakeCUPTI(t)
	file := filepath.Join(t.TempDir(), "fake.cuptirec")
	out, err := run(t, env, "record", lib, fakeMetricsFlag, "--no-activity.enabled", "--output="+file, "--duration=2s")
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	waitReplayed(t, file)
}

// waitReplayed replays a recording of the fake's two GPUs and waits for GPU 1's samples.
func waitReplayed(t *testing.T, file string) {
	t.Helper()
	p := start(t, "replay", file, "--replay.speed=20")
	waitFor(t, "replayed samples", func() bool {
		_, fams := p.scrape(t)
		v, ok := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": "1"})
		return ok && v > 100
	})
}

// `record --max-size` stops at the size, says so and leaves a recording that replays (before,
// nothing capped a recording: a flood of activity records wrote about 140 MB/s).
func TestRecordMaxSize(t *testing.T) {
	lib, env := fakeCUPTI(t)
	file := filepath.Join(t.TempDir(), "capped.cuptirec")
	t0 := time.Now()
	out, err := run(t, env, "record", lib, fakeMetricsFlag, "--no-activity.enabled", "--output="+file, "--duration=60s", "--max-size=256KiB")
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	took := time.Since(t0)
	st, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped after %s at %d bytes", took.Round(time.Millisecond), st.Size())
	if took > 30*time.Second || !strings.Contains(out, "recording stopped: the file reached --max-size") {
		t.Fatalf("recorded for %s without stopping at the size:\n%s", took, out)
	}
	// The writer flushes after each PM batch: the file passes the cap by at most its buffer.
	if st.Size() < 256<<10 || st.Size() > 256<<10+512<<10 {
		t.Errorf("file of %d bytes, want 256 KiB and at most one buffer more", st.Size())
	}
	waitReplayed(t, file)
}

// `record` writes a goodbye when an activity process leaves, so that a replay ends its
// presence there (before, none was written: a process stayed present to the recording's end,
// and a two-GPU recording counted the 8 s after its workload exited as untraced time).
func TestRecordWritesGoodbye(t *testing.T) {
	lib, env := fakeCUPTI(t)
	dir := t.TempDir()
	file, sock := filepath.Join(dir, "goodbye.cuptirec"), filepath.Join(dir, "activity.sock")
	cmd := exec.Command(binary, "record", lib, fakeMetricsFlag, "--no-health.enabled", "--activity.socket="+sock, "--output="+file, "--duration=3s")
	cmd.Env = append(cmd.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the activity socket", func() bool { _, err := os.Stat(sock); return err == nil })
	c := sendKernels(t, sock, honest(), 10, "_Z4workv")
	time.Sleep(200 * time.Millisecond)
	c.Close() // as a process that exits without a goodbye frame (os._exit)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("record: %v\n%s", err, out.String())
	}

	var frames []string
	for _, ev := range recordedEvents(t, file) {
		switch ev.Type {
		case recording.FrameHello, recording.FrameGoodbye:
			frames = append(frames, fmt.Sprintf("%s %d", ev.Type, ev.Process.Conn))
		case recording.FrameActivity:
			frames = append(frames, fmt.Sprintf("%s %d", ev.Type, ev.Activity.Conn))
		}
	}
	if want := []string{"hello 1", "activity 1", "goodbye 1"}; !slices.Equal(frames, want) {
		t.Errorf("activity frames %v, want %v", frames, want)
	}
}

// recordedEvents returns the events of a recording file; a bad frame fails the test.
func recordedEvents(t *testing.T, file string) []recording.Event {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := recording.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var evs []recording.Event
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}
