package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// The series budget of docs/sizing.md, on the generated busy node (8 GPUs, 30 traced pods,
// 5,000 kernel names) served with the defaults. Raise a limit only with the sizing guide.
const (
	budgetSeries = 2000    // samples of one text scrape
	budgetBytes  = 1 << 20 // bytes of one uncompressed text scrape
	// budgetIdleGPU bounds the series of one idle GPU (every series labelled with it): 129
	// before the idle budget (PM 30, NVML 48, PM sampling's self-metrics 35, attribution 16),
	// 60 with the defaults (docs/sizing.md "An idle GPU").
	budgetIdleGPU = 62
)

// replayNode generates the recording of spec and serves it at full speed, returning the
// exporter once its scrapes are steady (the replay is over and the attribution has
// caught up) and hold what a live node serves.
func replayNode(t testing.TB, spec demo.NodeSpec, args ...string) *exporterProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.cuptirec")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.GenerateNode(f, "../testdata/gh100_pm_sampling_base_metrics.tsv", spec); err != nil { // closes f
		t.Fatal(err)
	}
	// A window longer than the test keeps the PM gauges of the finished replay, as a live
	// node serves them.
	p := start(t, append([]string{"replay", path, "--replay.speed=0", "--pmsample.window=10m"}, args...)...)
	steadyScrape(t, p, 4, time.Second)
	return p
}

// steadyScrape waits until the replay is over and n scrapes in a row, every apart, serve as
// many series (the attribution catches up after the replay), and returns the last one.
func steadyScrape(t testing.TB, p *exporterProc, n int, every time.Duration) map[string]*dto.MetricFamily {
	t.Helper()
	last, same := -1, 0
	var fams map[string]*dto.MetricFamily
	testutil.WaitFor(t, "steady scrapes", 60*time.Second, every, func() bool {
		var body []byte
		body, fams = p.scrape(t)
		k := seriesIn(body)
		if k == last && strings.Contains(p.out.String(), "PM sample source finished") {
			same++
		} else {
			same = 0
		}
		last = k
		return same >= n-1
	})
	return fams
}

// seriesIn counts the samples of a text exposition.
func seriesIn(body []byte) int {
	n := 0
	for _, l := range strings.Split(string(body), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			n++
		}
	}
	return n
}

func TestBusyNodeBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and replays a 15 MB recording")
	}
	p := replayNode(t, demo.BusyNode)
	body, fams := p.scrape(t)
	n := seriesIn(body)
	t.Logf("busy node: %d series, %d bytes per scrape", n, len(body))
	if n > budgetSeries || len(body) > budgetBytes {
		t.Errorf("busy node: %d series, %d bytes per scrape; the budget is %d series and %d bytes (docs/sizing.md)", n, len(body), budgetSeries, budgetBytes)
		logLargest(t, fams)
	}
	// What the budget keeps: per-kernel and per-pod detail, what was folded counted.
	for _, name := range []string{"cupti_kernel_duration_seconds", "cupti_kernel_gpu_seconds_total", "cupti_kernel_sampled_seconds_total",
		"cupti_pod_dram_read_bytes_total", "cupti_kernel_dram_read_bytes_total", "cupti_memcpy_bytes_total"} {
		if fams[name] == nil {
			t.Errorf("no %s on the busy node", name)
		}
	}
	if m, ok := find(fams, "cupti_kernel_gpu_seconds_total", map[string]string{"namespace": "team-1", "pod": "job-29"}); !ok || value(m) <= 0 {
		t.Errorf("pod team-1/job-29 has no GPU time: %v", m)
	}
	if m, ok := find(fams, "cupti_activity_kernels_folded_total", nil); !ok || value(m) <= 0 {
		t.Errorf("nothing counted as folded into kernel=\"other\" with 5,000 names: %v", m)
	}
}

func TestIdleGPUBudget(t *testing.T) {
	gpuSeries := func(fams map[string]*dto.MetricFamily) (int, map[string]int) {
		n, by := 0, map[string]int{}
		for name, f := range fams {
			for _, m := range f.Metric {
				if labels(m)["gpu"] == "0" {
					n += seriesOf(f, m)
					by[name] += seriesOf(f, m)
				}
			}
		}
		return n, by
	}
	_, fams := replayNode(t, demo.IdleGPU).scrape(t)
	n, by := gpuSeries(fams)
	t.Logf("idle GPU: %d series", n)
	if n > budgetIdleGPU {
		t.Errorf("an idle GPU has %d series, want at most %d (docs/sizing.md \"An idle GPU\")", n, budgetIdleGPU)
		for name, k := range by {
			t.Logf("%4d %s", k, name)
		}
	}
	// What dashboards and alerts read of an idle GPU stays: the PM mean and max, the NVML
	// families of the health panels, the zero the ECC alert's increase() starts from, the
	// clock-event times the throttling alerts take rates of, the attribution's split.
	for _, s := range []struct {
		name   string
		labels map[string]string
	}{
		{"cupti_sm_active_ratio", nil}, {"cupti_sm_active_max_ratio", nil}, {"cupti_pcie_bytes_total", map[string]string{"direction": "rx"}},
		{"cupti_gpu_ecc_errors_total", map[string]string{"type": "uncorrected", "counter": "volatile"}},
		{"cupti_gpu_clock_event_seconds_total", map[string]string{"reason": "thermal"}},
		{"cupti_gpu_clock_event_seconds_total", map[string]string{"reason": "power"}},
		{"cupti_gpu_clock_event_reasons", map[string]string{"reason": "gpu_idle"}},
		{"cupti_gpu_remapped_rows_pending", nil}, {"cupti_gpu_remapped_rows_failed", nil},
		{"cupti_pm_samples_total", nil}, {"cupti_attribution_seconds_total", map[string]string{"kind": "idle"}},
	} {
		want := map[string]string{"gpu": "0"}
		for k, v := range s.labels {
			want[k] = v
		}
		if _, ok := find(fams, s.name, want); !ok {
			t.Errorf("idle GPU: no %s%v", s.name, s.labels)
		}
	}
	// --series.extra=all serves every series again: what the idle budget left out is a flag away.
	_, all := replayNode(t, demo.IdleGPU, "--series.extra=all").scrape(t)
	nAll, byAll := gpuSeries(all)
	t.Logf("idle GPU with --series.extra=all: %d series", nAll)
	for _, name := range []string{"cupti_sm_active_min_ratio", "cupti_gpu_bar1_memory_used_bytes", "cupti_pm_cupti_call_seconds_total",
		"cupti_pm_decode_duration_seconds", "cupti_pm_lost_seconds_total", "cupti_attribution_dropped_samples_total"} {
		if byAll[name] == 0 {
			t.Errorf("--series.extra=all: no %s", name)
		}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"cupti_gpu_ecc_errors_total", map[string]string{"counter": "aggregate", "type": "corrected"}},
		{"cupti_gpu_clock_event_reasons", map[string]string{"reason": "hw_slowdown"}},
		{"cupti_gpu_clock_event_seconds_total", map[string]string{"reason": "sync_boost"}},
		{"cupti_gpu_clock_hertz", map[string]string{"clock": "graphics"}},
		{"cupti_pm_samples_lost_total", map[string]string{"reason": "gap"}},
	} {
		if _, ok := find(all, c.name, c.labels); !ok {
			t.Errorf("--series.extra=all: no %s%v", c.name, c.labels)
		}
	}
}

// seriesOf is how many samples metric m of family f makes in the text format.
func seriesOf(f *dto.MetricFamily, m *dto.Metric) int {
	switch f.GetType() {
	case dto.MetricType_HISTOGRAM:
		return len(m.GetHistogram().GetBucket()) + 3 // +Inf, _sum, _count
	case dto.MetricType_SUMMARY:
		return len(m.GetSummary().GetQuantile()) + 2
	}
	return 1
}

func logLargest(t testing.TB, fams map[string]*dto.MetricFamily) {
	for name, f := range fams {
		n := 0
		for _, m := range f.Metric {
			n += seriesOf(f, m)
		}
		if n >= 50 {
			t.Logf("%6d %s", n, name)
		}
	}
}

// BenchmarkScrapeBusyNode times one /metrics scrape of the busy node over HTTP, as
// Prometheus scrapes it (text format, uncompressed); the budget is 100 ms. It reports the
// series and bytes of a scrape.
//
//	go test ./e2e -run '^$' -bench BusyNode -benchtime 20x
func BenchmarkScrapeBusyNode(b *testing.B) {
	p := replayNode(b, demo.BusyNode)
	req, _ := http.NewRequest("GET", "http://"+p.addr+"/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	var size int
	for b.Loop() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		size = int(n)
	}
	body, _ := p.scrape(b)
	b.ReportMetric(float64(size), "bytes/scrape")
	b.ReportMetric(float64(seriesIn(body)), "series/scrape")
}
