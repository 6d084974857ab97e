package demo

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// NodeSpec shapes a generated recording of one node: GPUs of which the first
// min(Pods, GPUs) run work, Pods traced processes (one per pod) spread over the GPUs
// round-robin, each launching kernels whose names come from KernelNames distinct names
// (a few popular ones and a long tail, every name launched at least once) and one
// collective-communication kernel a batch (nodeCollectives), with copies, fills and coverage
// spans, and the GPUs' NVML health every second. It is the fleet-sizing
// workload: docs/sizing.md counts the series a node of this shape serves.
type NodeSpec struct {
	GPUs        int
	Pods        int
	KernelNames int
	// Duration of the recording; default one minute.
	Duration time.Duration
	// KernelsPerBatch is the kernels each pod launches per 250 ms batch; default 20.
	KernelsPerBatch int
	// Seed makes another, equally shaped recording.
	Seed uint64
}

// BusyNode is the node of the sizing guide: 8 GPUs, 30 pods, 5,000 distinct kernel names.
var BusyNode = NodeSpec{GPUs: 8, Pods: 30, KernelNames: 5000}

// IdleGPU is one GPU with no traced work: what an idle GPU costs in series.
var IdleGPU = NodeSpec{GPUs: 1}

func (s NodeSpec) withDefaults() (NodeSpec, error) {
	if s.GPUs < 1 || s.GPUs > 64 || s.Pods < 0 || s.Pods > 10_000 || s.KernelNames < 0 || s.KernelNames > 1_000_000 {
		return s, fmt.Errorf("node spec %+v: want 1-64 GPUs, 0-10000 pods, 0-1000000 kernel names", s)
	}
	if s.Pods > 0 && s.KernelNames == 0 {
		s.KernelNames = 1
	}
	if s.Duration <= 0 {
		s.Duration = time.Minute
	}
	if s.Duration < 5*time.Second || s.Duration > time.Hour {
		return s, fmt.Errorf("node spec: duration %s outside 5s-1h", s.Duration)
	}
	if s.KernelsPerBatch <= 0 {
		s.KernelsPerBatch = 20
	}
	return s, nil
}

// nodeDevices names the spec's GPUs, all GH100.
func nodeDevices(n int) []pmdata.Device {
	devs := make([]pmdata.Device, n)
	for i := range devs {
		devs[i] = pmdata.Device{Index: i, UUID: fmt.Sprintf("GPU-5e0d%04x-0000-4000-8000-00000000%04x", i, i),
			Model: "NVIDIA H200", Chip: "GH100", PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x19+0x10*i)}
	}
	return devs
}

// nodeKernelName is the mangled name of kernel k ("_Z11kernel_0042PKfPfi").
func nodeKernelName(k int) string {
	n := fmt.Sprintf("kernel_%04d", k)
	return fmt.Sprintf("_Z%d%sPKfPfi", len(n), n)
}

// GenerateNode writes a recording of the node spec describes to w (marked synthetic); tsv
// is the GH100 PM-sampling catalog (testdata/gh100_pm_sampling_base_metrics.tsv). The
// output depends only on the inputs.
func GenerateNode(w io.Writer, tsv string, spec NodeSpec) error {
	spec, err := spec.withDefaults()
	if err != nil {
		return err
	}
	duration := uint64(spec.Duration)
	devices := nodeDevices(spec.GPUs)
	podsOn := make([]int, spec.GPUs) // pods per device
	for p := 0; p < spec.Pods; p++ {
		podsOn[p%spec.GPUs]++
	}
	load := func(dev int) float64 { return math.Min(1, float64(podsOn[dev])/4) }
	pidOn := func(dev int) string {
		if dev < spec.Pods {
			return fmt.Sprint(10000 + dev) // the first pod on the device
		}
		return ""
	}
	h := recording.Header{
		Created:   "2026-11-21T22:52:00Z",
		Producer:  "cupti-exporter synthetic generator (recording/demo, node)",
		Synthetic: true,
		Description: fmt.Sprintf("SYNTHETIC data, not measured: %s of one node, %d GH100 devices, %d traced pods, %d kernel names; NVML health every second",
			spec.Duration, spec.GPUs, spec.Pods, spec.KernelNames),
		IntervalNS: synthInterval,
	}
	rw, metrics, err := openSynthWriter(w, tsv, h, devices)
	if err != nil {
		return err
	}
	sh, err := newSynthHealth(devices, duration, load, pidOn)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 23))
	for p := 0; p < spec.Pods; p++ {
		proc := record.Process{PID: uint32(10000 + p), StartTime: synthStart - 5e9, Executable: "/usr/bin/python3",
			Cgroup: fmt.Sprintf("/synthetic/pod-%d", p), CUDAVersion: 13000, CUPTIVersion: 130001,
			DeviceUUIDs: []string{devices[p%spec.GPUs].UUID},
			Pod:         fmt.Sprintf("job-%02d", p), Namespace: fmt.Sprintf("team-%d", p%4), Container: "worker"}
		if err := rw.WriteHello(synthStart+1e9, recording.ProcessEvent{Conn: uint64(p + 1), Process: &proc}); err != nil {
			return err
		}
	}
	var zipf *rand.Zipf
	if spec.KernelNames > 1 {
		zipf = rand.NewZipf(rng, 1.2, 1, uint64(spec.KernelNames-1))
	}
	names := make([]string, spec.KernelNames)
	for k := range names {
		names[k] = nodeKernelName(k)
	}
	busy := func(t uint64) bool { return t >= 2e9 && t < duration-1e9 }
	for t := uint64(0); t < duration; t += synthBatch {
		at := synthStart + t + synthBatch
		for _, d := range devices {
			b := pmdata.Batch{Device: d.Index, Metrics: metrics}
			if t == 0 {
				b.DroppedFirst = 1
			}
			ph := "idle"
			if busy(t) {
				ph = "matmul"
			}
			for s := t; s < t+synthBatch; s += synthInterval {
				smp := pmdata.Sample{Start: synthStart + s, End: synthStart + s + synthInterval, Values: make([]float64, len(metrics))}
				for i, m := range metrics {
					v := level(bareBase(m), ph) * load(d.Index) * (1 + 0.05*rng.NormFloat64())
					smp.Values[i] = sampleValue(m, v)
				}
				b.Samples = append(b.Samples, smp)
			}
			if err := rw.WriteBatch(at, b); err != nil {
				return err
			}
		}
		if busy(t) {
			for p := 0; p < spec.Pods; p++ {
				recs := nodeActivity(rng, zipf, names, nodeCollectives[p%len(nodeCollectives)], synthStart+t, spec.KernelsPerBatch)
				conn := uint64(p + 1)
				if err := rw.WriteActivity(at, recording.ActivityBatch{Conn: conn, Records: recs}); err != nil {
					return err
				}
				span := record.Interval{Start: synthStart + t, End: synthStart + t + synthBatch}
				if err := rw.WriteCoverage(at, recording.CoverageBatch{Conn: conn, Spans: []record.Interval{span}}); err != nil {
					return err
				}
			}
		}
		if (t+synthBatch)%synthHealthInterval == 0 {
			if err := rw.WriteHealth(at, sh.snapshot(t+synthBatch)); err != nil {
				return err
			}
		}
	}
	for p := 0; p < spec.Pods; p++ {
		if err := rw.WriteGoodbye(synthStart+duration-1e9, uint64(p+1)); err != nil {
			return err
		}
	}
	return rw.Close(synthStart + duration)
}

// nodeCollectives are the collective-communication kernels of the node's pods, mostly NCCL's,
// mangled as CUPTI reports them (activity.CollectiveLibrary recognises them).
var nodeCollectives = []string{
	"_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE",
	"_Z31ncclDevKernel_AllGather_RING_LL24ncclDevKernelArgsStorageILm4096EE",
	"_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE",
	"_ZN7deep_ep9intranode8dispatchILi8ELi768ELi8192EEEvP4int4PfPiPlS3_S4_S4_PKS1_PKfPKlS9_PKbPKiiiiiiiiii",
	"_ZN4vllm26cross_device_reduce_1stageI13__nv_bfloat16Li8EEEvPNS_8RankDataENS_11RankSignalsEPNS_6SignalEPT_ii",
}

// nodeActivity is one pod's records of the batch that starts at start: n kernels one after
// the other (20 µs to 5 ms; names 80 % from the popular head, 20 % uniform over all of
// them), then the collective kernel comm (0.5 to 4 ms), two copies and a fill.
func nodeActivity(rng *rand.Rand, zipf *rand.Zipf, names []string, comm string, start uint64, n int) []record.Record {
	recs := make([]record.Record, 0, n+4)
	at := start
	for i := 0; i < n; i++ {
		k := 0
		switch {
		case zipf == nil:
		case rng.Float64() < 0.8:
			k = int(zipf.Uint64())
		default:
			k = rng.IntN(len(names))
		}
		d := uint64(20e3 * math.Pow(250, rng.Float64()))
		recs = append(recs, record.Record{Kind: record.KindKernel, Stream: 7, Start: at, End: at + d, Name: names[k]})
		at += d + 1e3
	}
	recs = append(recs, record.Record{Kind: record.KindKernel, Stream: 9, Start: at, End: at + uint64(0.5e6+3.5e6*rng.Float64()), Name: comm})
	recs = append(recs,
		record.Record{Kind: record.KindMemcpy, Stream: 8, Start: start, End: start + 2e6, Bytes: 64 << 20,
			CopyKind: 1, SrcKind: 2, DstKind: 3},
		record.Record{Kind: record.KindMemcpy, Stream: 8, Start: start + 3e6, End: start + 4e6, Bytes: 16 << 20,
			CopyKind: 2, SrcKind: 3, DstKind: 2},
		record.Record{Kind: record.KindMemset, Stream: 8, Start: start + 5e6, End: start + 5e6 + 50e3, Bytes: 8 << 20, MemoryKind: 3})
	return recs
}
