//go:build cgo

package pmsample

import (
	"log/slog"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// BenchmarkSamplePath is the exporter's own work on a PM sample's way from CUPTI to the
// snapshot (issue 32 item 5): the decode loop's cgo calls and timing, the per-sample callback
// (guard, loss account, the batch), delivery (thread CPU, admission) and the aggregator, at
// 1 ms with the curated GH100 set as the real library resolves it (the fake serves GH100's
// capture), 100 samples a decode as the 100 ms default decode period gives. The fake's own
// calls cost next to nothing; out-of-cupti-ns/sample leaves out even that (the time the
// exporter's call timers saw inside them), which is what the GPU stage perf compares with
// the CUPTI calls' time (docs/performance.md). gc-cpu-ns/sample is the runtime's estimate of
// the garbage collector's CPU (idle mark workers included: they take CPU an idle core would not
// spend), which GOGC and GOMEMLIMIT trade against heap.
func BenchmarkSamplePath(b *testing.B) {
	const perDecode = 100
	lib := pmtest.OpenFake(b)
	dir := cuptitest.ChipCatalogs(b)
	cuptitest.Inject(b, "catalogs="+dir+",chip=GH100,samples_per_decode=100")
	m, err := mapping.New()
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(lib, m, slog.New(slog.DiscardHandler), WithDevices(0))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := s.runners[0]
	if err := r.acquire(); err != nil {
		b.Fatal(err)
	}
	defer r.release()
	agg := aggregate.New(m, s.Devices(), s.Catalog(), nil, aggregate.WithStatus(s.Status))
	var samples int
	var inCUPTI time.Duration
	sink := func(bt pmdata.Batch) {
		samples += len(bt.Samples)
		c := bt.CUPTITime
		inCUPTI += c.Decode + c.SampleInfo + c.Evaluate + c.Reset + c.Session
		agg.Add(bt)
	}
	r.collect(sink) // the first decode drops the sample that began before Start
	samples, inCUPTI = 0, 0
	runtime.GC()
	gc0 := gcCPU()
	cpu0 := processCPU()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		r.collect(sink)
	}
	b.StopTimer()
	cpuNS := (processCPU() - cpu0) * 1e9
	runtime.GC() // the cycle in progress finishes: its cost is the loop's
	gcNS := (gcCPU() - gc0) * 1e9
	if samples < b.N*(perDecode-1) {
		b.Fatalf("%d samples in %d decodes", samples, b.N)
	}
	ns := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(ns/float64(samples), "ns/sample")
	b.ReportMetric((ns-float64(inCUPTI.Nanoseconds()))/float64(samples), "out-of-cupti-ns/sample")
	// The process's CPU outside the calls: the wall time above also counts the wait for the
	// decoding thread, which costs no CPU (cupti.Decoder).
	b.ReportMetric((cpuNS-float64(inCUPTI.Nanoseconds()))/float64(samples), "out-of-cupti-cpu-ns/sample")
	b.ReportMetric(float64(len(r.groups[0].Metrics)), "metrics")
	b.ReportMetric(gcNS/float64(samples), "gc-cpu-ns/sample")
}

// processCPU is the CPU seconds every thread of the process has spent (user and system).
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// gcCPU is the runtime's estimate of the CPU seconds its garbage collector has spent.
func gcCPU() float64 {
	m := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(m)
	return m[0].Value.Float64()
}
