package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cupti-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "cupti-exporter")
	build := exec.Command("go", "build", "-o", binary, "./cmd/cupti-exporter")
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building cupti-exporter:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// exporterProc is a running binary.
type exporterProc struct {
	addr string
	cmd  *exec.Cmd
	out  *testutil.SyncBuffer
	proc *testutil.Process
}

// start runs the binary with args plus a loopback listen address and waits for /readyz.
func start(t testing.TB, args ...string) *exporterProc {
	t.Helper()
	return startEnv(t, nil, args...)
}

// startEnv is start with extra environment variables.
func startEnv(t testing.TB, env []string, args ...string) *exporterProc {
	t.Helper()
	// Ready, and no replayed source still waiting for its first batch (/readyz turns ready
	// with the first source that produces: a recording's health frames can come before its
	// first PM batch).
	return startServing(t, nil, env, "/readyz", 30*time.Second, func(body string) bool { return !strings.Contains(body, "waiting for the first batch") }, args...)
}

// startServing launches the binary (launch) and waits until path serves (waitServing).
func startServing(t testing.TB, prefix, env []string, path string, timeout time.Duration, ready func(body string) bool, args ...string) *exporterProc {
	t.Helper()
	p := launch(t, prefix, env, args...)
	if err := p.waitServing(path, timeout, ready); err != nil {
		t.Fatalf("%v:\n%s", err, p.out.String())
	}
	return p
}

// launch starts the binary with args (behind prefix, a wrapper such as prlimit, when given),
// with extra environment variables. Its listeners take ports of the kernel's choice: a port
// found free and let go could be taken by another process before the exporter binds it (seen
// in CI); waitServing reads the one it got from its log.
func launch(t testing.TB, prefix, env []string, args ...string) *exporterProc {
	t.Helper()
	p := &exporterProc{out: &testutil.SyncBuffer{}}
	// The health listener (default :9478) gets a port of its own: tests run side by side.
	argv := append(slices.Clone(prefix), binary)
	argv = append(argv, append(args, "--web.listen-address=127.0.0.1:0", "--web.health-listen-address=127.0.0.1:0", "--log.level=debug")...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.proc = testutil.Start(t, p.cmd, func() {
		if t.Failed() {
			t.Logf("exporter output:\n%s", p.out.String())
		}
	})
	return p
}

// waitServing waits up to timeout for path to answer 200 with a body ready accepts (nil:
// any); it fails when the exporter exits first or the time is up. It sets p.addr from the
// exporter's log once the listener is open.
func (p *exporterProc) waitServing(path string, timeout time.Duration, ready func(body string) bool) error {
	deadline := time.Now().Add(timeout)
	for ; time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case <-p.proc.Done():
			return fmt.Errorf("exporter exited early (%v)", p.proc.Err())
		default:
		}
		if p.addr == "" {
			if p.addr = testutil.WebAddr([]byte(p.out.String())); p.addr == "" {
				continue
			}
		}
		resp, err := http.Get("http://" + p.addr + path)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && (ready == nil || ready(string(body))) {
				return nil
			}
		}
	}
	return fmt.Errorf("exporter not serving %s after %s", path, timeout)
}

// scrape returns the text exposition of /metrics and its parsed families.
func (p *exporterProc) scrape(t testing.TB) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing exposition: %v", err)
	}
	return body, fams
}

// scrapeTimes scrapes p n times, 20 ms apart, and returns how long each scrape took.
func (p *exporterProc) scrapeTimes(t testing.TB, n int) []time.Duration {
	t.Helper()
	var took []time.Duration
	for range n {
		start := time.Now()
		p.scrape(t)
		took = append(took, time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	return took
}

// scrapeMeanwhile scrapes p every 20 ms in the background until the function it returns is
// called; that returns how long each scrape took (one scrape at least).
func (p *exporterProc) scrapeMeanwhile(t testing.TB) (stop func() []time.Duration) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var took []time.Duration
	wg.Go(func() {
		for {
			start := time.Now()
			p.scrape(t)
			took = append(took, time.Since(start))
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() []time.Duration {
		close(done)
		wg.Wait()
		return took
	}
}

// runExit runs the binary to completion and returns its exit code and output.
func runExit(t *testing.T, timeout time.Duration, args ...string) (int, string) {
	t.Helper()
	return runExitEnv(t, timeout, nil, args...)
}

// runExitEnv is runExit with extra environment variables.
func runExitEnv(t *testing.T, timeout time.Duration, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v did not exit within %s:\n%s", args, timeout, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// find returns the series of family name whose labels include want.
func find(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f, ok := fams[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		ls := labels(m)
		for k, v := range want {
			if ls[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func contains(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
