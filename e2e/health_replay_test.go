package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// TestReplayServesHealth: the health frames of a recording (here the synthetic two-GPU
// one) are served as the health families, on both GPUs with the PM series' labels; the
// energy counter keeps increasing while the replay loops; --no-health.enabled leaves them out.
func TestReplayServesHealth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "synthetic.cuptirec")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Generate(f, "../testdata/gh100_pm_sampling_base_metrics.tsv"); err != nil { // closes f
		t.Fatal(err)
	}

	// 60 s at 100x: a pass every 0.6 s, so a few seconds see several loops.
	p := start(t, "replay", path, "--replay.loop", "--replay.speed=100")
	energy := func() (e0, e1 float64) {
		_, fams := p.scrape(t)
		for _, gpu := range []struct{ gpu, uuid, bus string }{
			{"0", "GPU-5d1f0c3a-7b2e-4c91-9a60-1f2e3d4c5b6a", "0000:19:00.0"},
			{"1", "GPU-8e2a4b6c-1d3f-4e5a-8b7c-9d0e1f2a3b4c", "0000:3b:00.0"},
		} {
			want := map[string]string{"gpu": gpu.gpu, "uuid": gpu.uuid, "model": "NVIDIA H200", "pci_bus_id": gpu.bus}
			for _, name := range []string{"cupti_gpu_power_watts", "cupti_gpu_memory_used_bytes", "cupti_gpu_temperature_celsius", "cupti_gpu_energy_joules_total"} {
				if _, ok := find(fams, name, want); !ok {
					t.Fatalf("no %s series with labels %v", name, want)
				}
			}
			if m, ok := find(fams, "cupti_gpu_clock_hertz", map[string]string{"gpu": gpu.gpu, "clock": "memory"}); !ok || value(m) != 3201e6 {
				t.Errorf("gpu %s memory clock %v, want 3201 MHz", gpu.gpu, m)
			}
		}
		m0, _ := find(fams, "cupti_gpu_energy_joules_total", map[string]string{"gpu": "0"})
		m1, _ := find(fams, "cupti_gpu_energy_joules_total", map[string]string{"gpu": "1"})
		if m0.Counter == nil {
			t.Fatalf("energy is not a counter: %v", m0)
		}
		return value(m0), value(m1)
	}
	deadline := time.Now().Add(20 * time.Second)
	for { // wait for the first health frame
		_, fams := p.scrape(t)
		if _, ok := fams["cupti_gpu_power_watts"]; ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no health family served after 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	a0, a1 := energy()
	time.Sleep(2 * time.Second) // more than three passes
	b0, b1 := energy()
	if b0 <= a0 || b1 <= a1 {
		t.Errorf("energy went from %v, %v J to %v, %v J over replay loops: want it increasing", a0, a1, b0, b1)
	}

	q := start(t, "replay", path, "--replay.speed=100", "--no-health.enabled")
	time.Sleep(500 * time.Millisecond)
	if _, fams := q.scrape(t); fams["cupti_gpu_power_watts"] != nil {
		t.Error("--no-health.enabled still serves the recorded health families")
	}
}
