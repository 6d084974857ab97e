package attribution

import (
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// BenchmarkJoinUntracedAlone measures the join on a GPU that no traced process uses: 1 kHz
// samples of the nine default metrics with one untraced process that NVML lists once a
// second (nvml-observations), or with none (no-observations, NVML health off). One op is one
// second of that load; cpu-s/s is the process's CPU time for it (pmcostref's "defaults" on
// the GPU: one uninjected matmul).
func BenchmarkJoinUntracedAlone(b *testing.B) {
	for _, nvml := range []bool{false, true} {
		name := "no-observations"
		if nvml {
			name = "nvml-observations"
		}
		b.Run(name, func(b *testing.B) {
			g := curatedLoad(b, EstimatorRate)
			g.a.ProcessDisconnected(g.p)
			step := func() {
				const stepNS = 100 * ms
				g.clk.set(g.now + stepNS)
				if nvml && (g.now-t0)%int64(time.Second) == 0 {
					g.a.ObserveProcesses(gpuprocs.Observation{GPU: "0", UUID: "GPU-aaaa", Start: time.Unix(0, g.now), End: time.Unix(0, g.now+int64(time.Second)),
						Shares: true, Processes: []gpuprocs.Process{{PID: 77, SMShare: 0.98}}})
				}
				n := int(stepNS / ms)
				ss := make([]pmdata.Sample, n)
				for i := range ss {
					s := g.now + int64(i)*ms
					v := make([]float64, len(g.metrics))
					for j := range v {
						v[j] = float64((s/ms+int64(j))%100) * 10
					}
					ss[i] = pmdata.Sample{Start: uint64(s), End: uint64(s + ms), Values: v}
				}
				g.a.Add(pmdata.Batch{Device: 0, Metrics: g.metrics, Samples: ss})
				g.now += stepNS
			}
			for range 40 {
				step()
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				for range 10 {
					step()
				}
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/s")
		})
	}
}
