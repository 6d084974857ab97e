package exporter

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// fakeProducer publishes snapshots through an atomic pointer, as sources do.
type fakeProducer struct {
	p atomic.Pointer[snapshot.Snapshot]
}

func newFakeProducer(s *snapshot.Snapshot) *fakeProducer {
	f := &fakeProducer{}
	f.p.Store(s)
	return f
}

func (f *fakeProducer) Snapshot() *snapshot.Snapshot { return f.p.Load() }

type fakeStatus []Status

func (f fakeStatus) Status() []Status { return f }

var (
	testTime  = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	testStart = time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)

	devLabels = snapshot.DeviceLabelNames

	smActive = &snapshot.Desc{
		Name: "cupti_sm_active_ratio", Help: "Fraction of time SMs were active.", Kind: snapshot.KindGauge,
		Unit: "ratio", OTelName: "gpu.sm.active", OTelUnit: "1", LabelNames: devLabels,
	}
	pcieBytes = &snapshot.Desc{
		Name: "cupti_pcie_bytes_total", Help: "Bytes moved over PCIe.", Kind: snapshot.KindCounter,
		Unit: "bytes", OTelName: "gpu.pcie.io", OTelUnit: "By", LabelNames: append(append([]string{}, devLabels...), "direction"),
	}
	kernelDuration = &snapshot.Desc{
		Name: "cupti_kernel_duration_seconds", Help: "Duration of kernels.", Kind: snapshot.KindHistogram,
		Unit: "seconds", OTelName: "gpu.kernel.duration", OTelUnit: "s", LabelNames: []string{"uuid", "process"},
	}
	memcpySize = &snapshot.Desc{
		Name: "cupti_memcpy_size_bytes", Help: "Size of memory copies.", Kind: snapshot.KindHistogram,
		Unit: "bytes", OTelName: "gpu.memcpy.size", OTelUnit: "By", LabelNames: []string{"kind"},
	}
)

func dev(gpu, uuid string, extra ...string) []string {
	return append([]string{gpu, uuid, "NVIDIA H200", "GH100", "00000000:19:00.0"}, extra...)
}

// nativeHist holds 0.5, 3, 4 and 100 (schema 0: index i covers (2^(i-1), 2^i]).
func nativeHist() *snapshot.HistogramValue {
	return &snapshot.HistogramValue{
		Count: 4, Sum: 107.5,
		Bounds: []float64{1, 10, 100}, Cumulative: []uint64{1, 3, 4},
		Native: true, Schema: 0, PositiveBuckets: map[int]int64{-1: 1, 2: 2, 7: 1},
	}
}

// pmSnapshot is what a PM sampling source would publish for two devices.
func pmSnapshot() *snapshot.Snapshot {
	return &snapshot.Snapshot{Time: testTime, Families: []snapshot.Family{
		{Desc: smActive, Samples: []snapshot.Sample{
			{LabelValues: dev("0", "GPU-aaaa"), Value: 0.25},
			{LabelValues: dev("1", "GPU-bbbb"), Value: 0.75},
		}},
		{Desc: pcieBytes, Samples: []snapshot.Sample{
			{LabelValues: dev("0", "GPU-aaaa", "rx"), Value: 1024, Start: testStart},
			{LabelValues: dev("0", "GPU-aaaa", "tx"), Value: 2048, Start: testStart},
		}},
	}}
}

// activitySnapshot is what the activity source would publish.
func activitySnapshot() *snapshot.Snapshot {
	return &snapshot.Snapshot{Time: testTime, Families: []snapshot.Family{
		{Desc: kernelDuration, Samples: []snapshot.Sample{
			{LabelValues: []string{"GPU-aaaa", "python3"}, Histogram: nativeHist(), Start: testStart},
		}},
		{Desc: memcpySize, Samples: []snapshot.Sample{
			{LabelValues: []string{"htod"}, Start: testStart, Histogram: &snapshot.HistogramValue{
				Count: 3, Sum: 5000, Bounds: []float64{1024, 4096}, Cumulative: []uint64{1, 2}}},
		}},
		// A second source adding devices to a family the PM source also has.
		{Desc: smActive, Samples: []snapshot.Sample{
			{LabelValues: dev("2", "GPU-cccc"), Value: 0.5},
		}},
	}}
}

func itoa[T int64 | uint64 | uint32](v T) string { return strconv.FormatInt(int64(v), 10) }

func expfmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
