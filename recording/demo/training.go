package demo

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// TrainingJob is one synchronous data-parallel job of a generated training node: one rank
// (a pod with one process) per GPU. Every step each rank copies its batch to the GPU, runs
// its compute kernels and then an NCCL all-reduce, launched on a second stream during its
// last compute kernel (DDP's bucketed overlap). The all-reduce moves its bytes once the
// last rank has arrived and ends on every rank together: the ranks that arrived earlier wait
// inside the NCCL kernel, which is what the straggler rules read (docs/training.md).
type TrainingJob struct {
	Name      string // the job; its pods are Name-0, Name-1, ...
	Namespace string
	Ranks     int
	// SlowRank's compute takes Slowdown longer (0.3: 30 %) from SlowFrom on (the start
	// when zero); SlowRank -1: a balanced job.
	SlowRank int
	Slowdown float64
	SlowFrom time.Duration
}

// TrainingSpec shapes a generated training node: its jobs, side by side on consecutive GPUs.
type TrainingSpec struct {
	Jobs []TrainingJob
	// Duration of the recording; default one minute.
	Duration time.Duration
	Seed     uint64
}

// TrainingNode is the node CI's Prometheus check replays (dashboards/training_e2e_test.go):
// job "pretrain" (a JobSet, in the check's kube-state-metrics stand-in) whose rank 1 computes
// 30 % longer, and the balanced job "finetune" (a PyTorchJob), two ranks each on four GPUs.
var TrainingNode = TrainingSpec{Jobs: []TrainingJob{
	{Name: "pretrain", Namespace: "ml", Ranks: 2, SlowRank: 1, Slowdown: 0.3},
	{Name: "finetune", Namespace: "ml", Ranks: 2, SlowRank: -1},
}}

// The step of a generated rank, in ns: the batch's host-to-device copy, computeKernels
// kernels of about kernelNS each (2 % jitter per rank and step), the all-reduce launched
// overlapNS before the rank's compute ends, transferNS of it moving bytes after the last
// rank arrived, and a host gap before the next step.
const (
	stepCopyNS     = 2_500_000
	computeKernels = 6
	kernelNS       = 6_000_000
	overlapNS      = 2_000_000
	transferNS     = 4_000_000
	hostGapNS      = 500_000
	allReduceBytes = 256 << 20
)

// Kernel names of a training step, mangled as CUPTI reports them.
var (
	trainGemm      = "nvjet_sm90_tst_256x128_64x4_2x1_v_bz_coopA_NNT"
	trainElemwise  = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_13BUnaryFunctorIN3c108BFloat16ES4_S4_NS0_10MulFunctorIfEEEESt5arrayIPcLm2EEEEviT0_T1_"
	trainAllReduce = "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE"
)

// pmState is what a GPU does at an instant, for its PM samples.
type pmState int

const (
	pmIdle pmState = iota
	pmCopy
	pmCompute
	pmWait     // inside the all-reduce, waiting for the other ranks
	pmTransfer // the all-reduce moving bytes
	numPMStates
)

// seg is a stretch of one GPU's time in one PM state.
type seg struct {
	start, end uint64 // ns since the recording's start
	state      pmState
}

// trainLevel is a curated metric's level (percent, or bytes per second) in a PM state.
func trainLevel(base string, st pmState) float64 {
	switch st {
	case pmCompute:
		return level(base, "matmul")
	case pmCopy:
		return level(base, "copies")
	case pmWait, pmTransfer:
		l := map[string]float64{"gr__cycles_active": 100, "sm__cycles_active": 12, "tpc__warps_active_realtime": 2, "dram__cycles_active": 4}[base]
		if st == pmTransfer {
			l = map[string]float64{"gr__cycles_active": 100, "sm__cycles_active": 14, "tpc__warps_active_realtime": 3,
				"dram__cycles_active": 35, "nvlrx__bytes": allReduceBytes / float64(transferNS) * 1e9, "nvltx__bytes": allReduceBytes / float64(transferNS) * 1e9}[base]
		}
		return l
	}
	return 0
}

// trainRank is one rank's generated activity: its records by end time and its PM segments.
type trainRank struct {
	recs []record.Record
	segs []seg
}

// simulateJob generates the steps of job j from 2 s to 1 s before the end, its ranks on GPUs first,
// first+1, ...; times in ns since the recording's start.
func simulateJob(rng *rand.Rand, j TrainingJob, first int, duration uint64) []trainRank {
	ranks := make([]trainRank, j.Ranks)
	end := duration - 1e9
	for at := uint64(2e9); ; {
		arrive := make([]uint64, j.Ranks)
		computeStart := make([]uint64, j.Ranks)
		var last uint64
		for r := range ranks {
			gap := uint64(float64(hostGapNS) * (0.6 + 0.8*rng.Float64()))
			cs := at + gap + stepCopyNS
			slow := 1.0
			if r == j.SlowRank && at >= uint64(j.SlowFrom) {
				slow += j.Slowdown
			}
			t := cs
			for k := range computeKernels {
				d := uint64(float64(kernelNS) * slow * (1 + 0.02*rng.NormFloat64()))
				name := trainGemm
				if k%3 == 2 {
					name, d = trainElemwise, d/8
				}
				ranks[r].recs = append(ranks[r].recs, record.Record{Kind: record.KindKernel, Device: uint32(first + r), Stream: 7, Start: t, End: t + d, Name: name})
				t += d + 5_000
			}
			ranks[r].recs = append(ranks[r].recs, record.Record{Kind: record.KindMemcpy, Device: uint32(first + r), Stream: 13,
				Start: at + gap, End: cs, Bytes: 64 << 20, CopyKind: 1, SrcKind: 2, DstKind: 3})
			ranks[r].segs = append(ranks[r].segs, seg{at, at + gap, pmIdle}, seg{at + gap, cs, pmCopy}, seg{cs, t, pmCompute})
			computeStart[r], arrive[r] = cs, t
			last = max(last, t)
		}
		done := last + transferNS
		if done >= end {
			break
		}
		for r := range ranks {
			ar := arrive[r] - min(overlapNS, arrive[r]-computeStart[r])
			ranks[r].recs = append(ranks[r].recs, record.Record{Kind: record.KindKernel, Device: uint32(first + r), Stream: 21,
				Start: ar, End: done, Name: trainAllReduce})
			ranks[r].segs = append(ranks[r].segs, seg{arrive[r], last, pmWait}, seg{last, done, pmTransfer})
		}
		at = done
	}
	for r := range ranks {
		slices.SortFunc(ranks[r].recs, func(x, y record.Record) int { return cmp.Compare(x.End, y.End) })
	}
	return ranks
}

// GenerateTraining writes a recording of the training node spec describes to w (marked
// synthetic); tsv is the GH100 PM-sampling catalog. The output depends only on the inputs.
func GenerateTraining(w io.Writer, tsv string, spec TrainingSpec) error {
	if spec.Duration <= 0 {
		spec.Duration = time.Minute
	}
	gpus := 0
	for _, j := range spec.Jobs {
		if j.Ranks < 1 || j.Ranks > 64 || j.Name == "" || j.SlowRank >= j.Ranks || j.Slowdown < 0 || j.Slowdown > 10 {
			return fmt.Errorf("training job %+v: want a name, 1-64 ranks, a slow rank among them (or -1) and a slowdown in 0-10", j)
		}
		gpus += j.Ranks
	}
	if gpus < 1 || gpus > 64 || spec.Duration < 5*time.Second || spec.Duration > time.Hour {
		return fmt.Errorf("training spec: want 1-64 GPUs in all and 5s-1h, got %d and %s", gpus, spec.Duration)
	}
	duration := uint64(spec.Duration)
	devices := nodeDevices(gpus)
	var desc []string
	for _, j := range spec.Jobs {
		d := fmt.Sprintf("%s: %d ranks", j.Name, j.Ranks)
		if j.SlowRank >= 0 {
			d += fmt.Sprintf(", rank %d %.0f %% slower from %s", j.SlowRank, 100*j.Slowdown, j.SlowFrom)
		}
		desc = append(desc, d)
	}
	h := recording.Header{
		Created:   "2026-11-21T22:52:00Z",
		Producer:  "cupti-exporter synthetic generator (recording/demo, training)",
		Synthetic: true,
		Description: fmt.Sprintf("SYNTHETIC data, not measured: %s of synchronous data-parallel training on %d GH100 devices (%s); NVML health every second",
			spec.Duration, gpus, strings.Join(desc, "; ")),
		IntervalNS: synthInterval,
	}
	rw, metrics, err := openSynthWriter(w, tsv, h, devices)
	if err != nil {
		return err
	}
	pid := func(dev int) string { return fmt.Sprint(20000 + dev) }
	sh, err := newSynthHealth(devices, duration, func(int) float64 { return 1 }, pid)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 29))
	var ranks []trainRank
	uuids := make([]string, gpus)
	for i, d := range devices {
		uuids[i] = d.UUID
	}
	for _, j := range spec.Jobs {
		first := len(ranks)
		for r := range j.Ranks {
			dev := first + r
			// Each rank sees every GPU of the node (torchrun) and uses its own.
			proc := record.Process{PID: uint32(20000 + dev), StartTime: synthStart - 5e9, Executable: "/usr/bin/python3",
				Cgroup: fmt.Sprintf("/synthetic/%s-%d", j.Name, r), CUDAVersion: 13000, CUPTIVersion: 130001, DeviceUUIDs: uuids,
				Pod: fmt.Sprintf("%s-%d", j.Name, r), Namespace: j.Namespace, Container: "trainer"}
			if err := rw.WriteHello(synthStart+1e9, recording.ProcessEvent{Conn: uint64(dev + 1), Process: &proc}); err != nil {
				return err
			}
		}
		ranks = append(ranks, simulateJob(rng, j, first, duration)...)
	}
	next := make([]int, len(ranks)) // next record of each rank to send
	segAt := make([]int, len(ranks))
	spanFrom := synthStart + 1e9
	// flush sends what each rank's library sends at a periodic flush at (absolute ns): the
	// records completed by then, and the span since the previous flush after them.
	flush := func(at uint64) error {
		for dev := range ranks {
			var batch []record.Record
			for recs := ranks[dev].recs; next[dev] < len(recs) && synthStart+recs[next[dev]].End <= at; next[dev]++ {
				r := recs[next[dev]]
				r.Start += synthStart
				r.End += synthStart
				batch = append(batch, r)
			}
			if len(batch) > 0 {
				if err := rw.WriteActivity(at, recording.ActivityBatch{Conn: uint64(dev + 1), Records: batch}); err != nil {
					return err
				}
			}
			span := record.Interval{Start: spanFrom, End: at}
			if err := rw.WriteCoverage(at, recording.CoverageBatch{Conn: uint64(dev + 1), Spans: []record.Interval{span}}); err != nil {
				return err
			}
		}
		spanFrom = at
		return nil
	}
	for t := uint64(0); t < duration; t += synthBatch {
		at := synthStart + t + synthBatch
		for dev, d := range devices {
			b := pmdata.Batch{Device: d.Index, Metrics: metrics}
			if t == 0 {
				b.DroppedFirst = 1
			}
			for s := t; s < t+synthBatch; s += synthInterval {
				var frac [numPMStates]float64 // share of the sample in each state
				segs := ranks[dev].segs
				for i := segAt[dev]; i < len(segs) && segs[i].start < s+synthInterval; i++ {
					if ov := min(segs[i].end, s+synthInterval) - max(segs[i].start, s); int64(ov) > 0 && segs[i].end > s {
						frac[segs[i].state] += float64(ov) / synthInterval
					}
					if segs[i].end <= s+synthInterval {
						segAt[dev] = i + 1
					}
				}
				smp := pmdata.Sample{Start: synthStart + s, End: synthStart + s + synthInterval, Values: make([]float64, len(metrics))}
				for i, m := range metrics {
					v := 0.0
					for st, f := range frac {
						v += f * trainLevel(bareBase(m), pmState(st))
					}
					v *= 1 + 0.03*rng.NormFloat64()
					smp.Values[i] = sampleValue(m, v)
				}
				b.Samples = append(b.Samples, smp)
			}
			if err := rw.WriteBatch(at, b); err != nil {
				return err
			}
		}
		// Each rank's flush: the records completed by now, then the span they cover.
		if at > spanFrom && at < synthStart+duration-1e9 {
			if err := flush(at); err != nil {
				return err
			}
		}
		if (t+synthBatch)%synthHealthInterval == 0 {
			if err := rw.WriteHealth(at, sh.snapshot(t+synthBatch)); err != nil {
				return err
			}
		}
	}
	if err := flush(synthStart + duration - 1e9); err != nil { // at exit
		return err
	}
	for dev := range ranks {
		if err := rw.WriteGoodbye(synthStart+duration-1e9, uint64(dev+1)); err != nil {
			return err
		}
	}
	return rw.Close(synthStart + duration)
}
