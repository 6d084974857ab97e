package e2e

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// recorded holds per-device facts of the embedded recording to check scraped values against.
type recorded struct {
	devices []pmdata.Device
	minPct  map[int]map[string]float64 // device -> Perfworks metric -> min sample value
	maxPct  map[int]map[string]float64
	sum     map[int]map[string]float64
}

// metric returns the full name of the recorded metric that ends in suffix.
func (r recorded) metric(t *testing.T, suffix string) string {
	t.Helper()
	for name := range r.sum[r.devices[0].Index] {
		if strings.HasSuffix(name, suffix) {
			return name
		}
	}
	t.Fatalf("the demo recording has no metric ending in %s", suffix)
	return ""
}

func readDemo(t *testing.T) recorded {
	t.Helper()
	rd, err := recording.NewReader(bytes.NewReader(demo.Recording()))
	if err != nil {
		t.Fatal(err)
	}
	r := recorded{minPct: map[int]map[string]float64{}, maxPct: map[int]map[string]float64{}, sum: map[int]map[string]float64{}}
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		switch ev.Type {
		case recording.FrameDevices:
			r.devices = ev.Devices
		case recording.FrameBatch:
			d := ev.Batch.Device
			if r.minPct[d] == nil {
				r.minPct[d], r.maxPct[d], r.sum[d] = map[string]float64{}, map[string]float64{}, map[string]float64{}
			}
			for _, s := range ev.Batch.Samples {
				for i, m := range ev.Batch.Metrics {
					v := s.Values[i]
					if old, ok := r.minPct[d][m]; !ok || v < old {
						r.minPct[d][m] = v
					}
					r.maxPct[d][m] = math.Max(r.maxPct[d][m], v)
					r.sum[d][m] += v
				}
			}
		}
	}
	if len(r.devices) == 0 {
		t.Fatal("demo recording has no devices")
	}
	return r
}

// TestDemoScrape runs --demo, scrapes /metrics and checks names, labels and values against
// the embedded recording, then lints the exposition.
func TestDemoScrape(t *testing.T) {
	rec := readDemo(t)
	p := start(t, "--demo", "--series.extra=window_min") // the min gauges, off by default, for the ordering check
	body, fams := p.scrape(t)
	if out := os.Getenv("E2E_SCRAPE_OUT"); out != "" { // .ci/run checks it with promtool
		if err := os.WriteFile(out, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	curated := []string{
		"cupti_graphics_engine_active_ratio", "cupti_sm_active_ratio", "cupti_sm_occupancy_ratio",
		"cupti_tensor_pipe_active_ratio", "cupti_fp64_pipe_active_ratio", "cupti_dram_active_ratio",
		"cupti_pcie_bytes_total",
	}
	for _, name := range curated {
		if _, ok := fams[name]; !ok {
			t.Errorf("family %s missing", name)
		}
	}
	for _, d := range rec.devices {
		want := map[string]string{"gpu": strconv.Itoa(d.Index), "uuid": d.UUID, "model": d.Model, "chip": d.Chip}
		// Gauge window statistics lie within the recorded range and are ordered.
		smActive := rec.metric(t, "sm__cycles_active.avg.pct_of_peak_sustained_elapsed")
		mean, ok1 := find(fams, "cupti_sm_active_ratio", want)
		mx, ok2 := find(fams, "cupti_sm_active_max_ratio", want)
		mn, ok3 := find(fams, "cupti_sm_active_min_ratio", want)
		if !ok1 || !ok2 || !ok3 {
			t.Errorf("device %d: cupti_sm_active_{,max_,min_}ratio with labels %v missing", d.Index, want)
			continue
		}
		lo, hi := rec.minPct[d.Index][smActive]/100, rec.maxPct[d.Index][smActive]/100
		const eps = 1e-9
		if !(lo-eps <= value(mn) && value(mn) <= value(mean)+eps && value(mean) <= value(mx)+eps && value(mx) <= hi+eps) {
			t.Errorf("device %d: sm active min %g mean %g max %g, want ordered within the recorded [%g, %g]",
				d.Index, value(mn), value(mean), value(mx), lo, hi)
		}
		// Counters: what was replayed so far is positive and at most one pass of the recording.
		var pcie float64
		for _, dir := range []string{"rx", "tx"} {
			w := map[string]string{"uuid": d.UUID, "direction": dir}
			m, ok := find(fams, "cupti_pcie_bytes_total", w)
			if !ok {
				t.Errorf("device %d: cupti_pcie_bytes_total{direction=%q} missing", d.Index, dir)
				continue
			}
			pcie += value(m)
		}
		total := rec.sum[d.Index][rec.metric(t, "pcie__read_bytes.sum")] + rec.sum[d.Index][rec.metric(t, "pcie__write_bytes.sum")]
		if pcie <= 0 || pcie > total {
			t.Errorf("device %d: pcie bytes %g, want in (0, %g]", d.Index, pcie, total)
		}
	}

	lint(t, body)
}

// lint fails on every promlint problem of the exporter's own families.
func lint(t *testing.T, body []byte) {
	t.Helper()
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		if strings.HasPrefix(pr.Metric, "go_") || strings.HasPrefix(pr.Metric, "process_") {
			continue
		}
		t.Errorf("promlint: %s: %s", pr.Metric, pr.Text)
	}
}
