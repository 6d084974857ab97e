package attribution

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestConservationProperty runs randomised timelines (overlapping and concurrent kernels,
// gaps, sampling pauses, late records, processes that connect and disconnect mid-window,
// coverage with gaps, lossy and out-of-order spans) through both estimators and checks,
// after every step and at the end, that for every metric and device the attributed parts
// (kernels, "(idle)", "(untraced)", "other") add up to the device total of the samples
// attributed so far, that the sampled seconds add up to the sampled time, and that the pod
// families add up to the traced kernels.
func TestConservationProperty(t *testing.T) {
	seeds := 24
	if testing.Short() || raceEnabled {
		seeds = 6
	}
	// The timelines must exercise what they claim to: each of these is non-zero in some run.
	exercised := map[string]float64{}
	for _, est := range Estimators {
		for seed := range seeds {
			t.Run(fmt.Sprintf("%s/seed%d", est, seed), func(t *testing.T) {
				snap := runRandomTimeline(t, est, uint64(seed))
				for k, v := range map[string]float64{
					"late records":      sum(snap, "cupti_attribution_late_records_total"),
					"idle":              sum(snap, "cupti_kernel_sampled_seconds_total", "*", "*", labelIdle),
					"untraced":          sum(snap, "cupti_kernel_sampled_seconds_total", "*", "*", labelUntraced),
					"other":             sum(snap, "cupti_kernel_sampled_seconds_total", "*", "*", labelOther),
					"memcpy":            sum(snap, "cupti_kernel_sampled_seconds_total", "*", "*", labelMemcpy),
					"bad spans":         sum(snap, "cupti_attribution_dropped_records_total", "bad_span"),
					"out-of-order span": sum(snap, "cupti_attribution_bad_coverage_spans_total", "out_of_order"),
					"pod \"\"":          sum(snap, "cupti_pod_sampled_seconds_total", "*", "*", "", ""),
					"nvml pod":          sum(snap, "cupti_pod_sampled_seconds_total", "*", "*", "*", "*", "*", sourceNVML),
				} {
					exercised[k] += v
				}
			})
		}
	}
	for k, v := range exercised {
		if v == 0 {
			t.Errorf("no random timeline exercised %s", k)
		}
	}
}

type sentSample struct {
	start, end int64
	sm, bytes  float64
}

func runRandomTimeline(t *testing.T, est string, seed uint64) *snapshot.Snapshot {
	rng := rand.New(rand.NewPCG(seed, 99))
	topK := 3 // kernels beyond the first three names are labelled "other"
	a, clk := newTest(t, WithEstimator(est), WithWatermark(time.Duration(200+rng.IntN(800))*time.Millisecond),
		WithKernelLabels(KernelLabelFunc(func(m string) string {
			if m[len(m)-1]-'0' < byte(topK) {
				return m
			}
			return "other"
		})))
	const step = 100 * ms
	steps := 20 + rng.IntN(20)
	var sent [2][]sentSample
	type pending struct {
		at  int64 // wall time it is delivered
		p   *record.Process
		rec record.Record
	}
	var queue []pending
	var spans []sentRecord
	labelOf := func(r record.Record) string {
		switch {
		case r.Kind == record.KindMemcpy:
			return labelMemcpy
		case r.Name[len(r.Name)-1]-'0' < byte(topK):
			return r.Name
		}
		return labelOther
	}
	type procSim struct {
		p     *record.Process
		cov   bool  // sends coverage
		until int64 // disconnects then
		gone  bool
	}
	var procs []*procSim
	next := [2]int64{t0, t0}
	for i := range steps {
		now := t0 + int64(i)*step
		clk.set(now)
		// processes come and go
		if len(procs) < 4 && rng.IntN(3) == 0 {
			gpus := [][]string{{"0"}, {"1"}, {"0", "1"}, {"1", "0"}}[rng.IntN(4)]
			p, info := newProc(uint32(len(procs)+1), fmt.Sprintf("pod%d", rng.IntN(3)), gpus...)
			if rng.IntN(4) == 0 {
				info.Pod, info.Namespace, info.Container = "", "", ""
			}
			a.ProcessConnected(p, info)
			procs = append(procs, &procSim{p: p, cov: rng.IntN(3) > 0, until: now + int64(rng.IntN(steps*2))*step})
		}
		for _, ps := range procs {
			if ps.gone {
				continue
			}
			if now >= ps.until {
				a.ProcessDisconnected(ps.p)
				ps.gone = true
				continue
			}
			// kernels of this step, delivered 0-1.5 s later (some later than the watermark)
			nk := rng.IntN(60)
			for range nk {
				s := now + rng.Int64N(step)
				d := []int64{1000, 20_000, 300_000, 2 * ms, 7 * ms}[rng.IntN(5)]
				d = d/2 + rng.Int64N(d)
				r := kernel(uint32(rng.IntN(2)), fmt.Sprintf("k%d", rng.IntN(6)), s, s+d)
				switch rng.IntN(10) {
				case 0:
					r.Kind = record.KindMemcpy
				case 1:
					r.End = r.Start - 5 // bad span
				}
				queue = append(queue, pending{at: now + rng.Int64N(1500*ms), p: ps.p, rec: r})
				if r.End > r.Start {
					spans = append(spans, sentRecord{dev: int(r.Device), pid: ps.p.PID, label: labelOf(r), start: int64(r.Start), end: int64(r.End)})
				}
			}
			if ps.cov {
				var spans []record.Interval
				lo := now
				for lo < now+step {
					l := rng.Int64N(step / 2)
					spans = append(spans, record.Interval{Start: uint64(lo), End: uint64(lo + l), Lossy: rng.IntN(8) == 0})
					lo += l + rng.Int64N(step/4) // gaps
				}
				if rng.IntN(6) == 0 && len(spans) > 1 {
					spans[0], spans[1] = spans[1], spans[0]
				}
				a.Coverage(ps.p, spans)
			}
		}
		// NVML's view of each device now and then: some of the traced processes, untraced
		// ones with and without pods, shares known or not
		for dev := range 2 {
			if rng.IntN(2) == 0 {
				continue
			}
			o := gpuprocs.Observation{GPU: fmt.Sprint(dev), Start: time.Unix(0, now-rng.Int64N(step)), End: time.Unix(0, now+step), Shares: rng.IntN(4) > 0}
			for k := range procs {
				if rng.IntN(2) == 0 {
					o.Processes = append(o.Processes, gpuprocs.Process{PID: uint32(k + 1), SMShare: rng.Float64() / 2})
				}
			}
			for k := range rng.IntN(3) {
				op := gpuprocs.Process{PID: uint32(900 + k), SMShare: float64(rng.IntN(3)) / 4}
				if rng.IntN(2) == 0 {
					op.Namespace, op.Pod, op.Container = "ns", fmt.Sprintf("untraced%d", k), "c"
				}
				o.Processes = append(o.Processes, op)
			}
			a.ObserveProcesses(o)
		}
		// deliver due records
		slices.SortFunc(queue, func(x, y pending) int { return int(x.at - y.at) })
		k := 0
		for _, q := range queue {
			if q.at <= now {
				a.Records(q.p, []record.Record{q.rec})
			} else {
				queue[k] = q
				k++
			}
		}
		queue = queue[:k]
		// PM samples of each device, up to now (pauses now and then)
		for dev := range 2 {
			if rng.IntN(8) == 0 {
				next[dev] = now + step // sampling paused this step
				continue
			}
			var ss []pmdata.Sample
			for next[dev] < now+step {
				l := ms/2 + rng.Int64N(ms)
				s := sentSample{start: next[dev], end: next[dev] + l, sm: 100 * rng.Float64(), bytes: float64(rng.IntN(1_000_000))}
				if rng.IntN(20) == 0 {
					s.sm, s.bytes = 0, 0
				}
				sent[dev] = append(sent[dev], s)
				ss = append(ss, pmdata.Sample{Start: uint64(s.start), End: uint64(s.end), Values: []float64{s.sm, s.bytes}})
				next[dev] = s.end
				if rng.IntN(200) == 0 {
					next[dev] += rng.Int64N(5 * ms) // a gap between samples
				}
			}
			clk.set(now + rng.Int64N(step))
			a.Add(pmdata.Batch{Device: dev, Metrics: testMetrics, Samples: ss})
		}
		checkConservation(t, a, sent, spans, false)
	}
	clk.advance(5 * time.Second)
	for _, q := range queue {
		a.Records(q.p, []record.Record{q.rec})
	}
	a.Flush()
	checkConservation(t, a, sent, spans, true)
	snap := a.Snapshot()
	for _, f := range snap.Families {
		var keys []string
		for _, s := range f.Samples {
			keys = append(keys, fmt.Sprint(s.LabelValues))
		}
		slices.Sort(keys)
		if len(slices.Compact(keys)) != len(f.Samples) {
			t.Errorf("%s: repeated label sets", f.Desc.Name)
		}
	}
	return snap
}

// checkConservation compares the snapshot with the samples sent up to each device's
// frontier (all of them when final).
// sentRecord is a valid record the timeline sent, for the bound on ratios.
type sentRecord struct {
	dev        int
	pid        uint32
	label      string
	start, end int64
}

// spanned is, per kernel label of device dev, the time its records spanned the samples sent:
// in each sample, each process's records of the label for at most the sample's length (what
// capActive bounds a ratio's active time by: a kernel is active at most while it runs).
func spanned(sent []sentSample, recs []sentRecord, dev int) map[string]float64 {
	type key struct {
		label string
		pid   uint32
	}
	out := map[string]float64{}
	for _, smp := range sent {
		per := map[key]int64{}
		for _, r := range recs {
			if r.dev == dev && r.start < smp.end && r.end > smp.start {
				per[key{r.label, r.pid}] += min(r.end, smp.end) - max(r.start, smp.start)
			}
		}
		for k, v := range per {
			out[k.label] += float64(min(v, smp.end-smp.start)) / 1e9
		}
	}
	return out
}

func checkConservation(t *testing.T, a *Attributor, sent [2][]sentSample, recs []sentRecord, final bool) {
	t.Helper()
	a.mu.Lock()
	var frontier [2]int64
	for dev := range 2 {
		frontier[dev] = a.devs[dev].frontier
	}
	a.mu.Unlock()
	a.dirty.Store(true)
	snap := a.Snapshot()
	for dev := range 2 {
		var wantSec, wantSM, wantBytes float64
		for _, s := range sent[dev] {
			if s.end > frontier[dev] && !final {
				continue
			}
			sec := float64(s.end-s.start) / 1e9
			wantSec += sec
			wantSM += s.sm * 0.01 * sec
			wantBytes += s.bytes
		}
		gpu := fmt.Sprint(dev)
		got := map[string]float64{
			"sampled seconds": sum(snap, "cupti_kernel_sampled_seconds_total", gpu),
			"kind seconds":    sum(snap, "cupti_attribution_seconds_total", gpu),
			"sm active":       sum(snap, "cupti_kernel_sm_active_seconds_total", gpu),
			"pcie bytes":      sum(snap, "cupti_kernel_pcie_bytes_total", gpu),
		}
		want := map[string]float64{"sampled seconds": wantSec, "kind seconds": wantSec, "sm active": wantSM, "pcie bytes": wantBytes}
		for k, w := range want {
			if !near(got[k], w, 1e-9) {
				t.Fatalf("gpu %s %s: attributed %v, device total %v (final %v)", gpu, k, got[k], w, final)
			}
		}
		// no class is active longer than its records ran in the samples (times the highest ratio
		// sent, when above 1): kernels running side by side each run their whole span
		bound := 1.0
		var ranFor map[string]float64
		if final {
			ranFor = spanned(sent[dev], recs, dev)
		}
		for _, s := range sent[dev] {
			bound = max(bound, s.sm*0.01)
		}
		for _, f := range snap.Families {
			if f.Desc.Name != "cupti_kernel_sm_active_seconds_total" {
				continue
			}
			for _, s := range f.Samples {
				if s.LabelValues[0] != gpu {
					continue
				}
				ran, _ := value(snap, "cupti_kernel_sampled_seconds_total", s.LabelValues[:3]...)
				if l := s.LabelValues[2]; ranFor != nil && l != labelIdle && l != labelUntraced {
					ran = max(ran, ranFor[l])
				}
				if final && s.Value > ran*bound*(1+1e-9)+1e-12 {
					t.Fatalf("gpu %s kernel %q: %v active seconds in %v seconds of its records (ratio %.3f, at most %.3f was sent)",
						gpu, s.LabelValues[2], s.Value, ran, s.Value/ran, bound)
				}
			}
		}
		// pods add up to the traced kernels
		traced := func(name string) float64 {
			var t float64
			for _, f := range snap.Families {
				for _, s := range f.Samples {
					if f.Desc.Name == name && s.LabelValues[0] == gpu && s.LabelValues[2] != labelIdle && s.LabelValues[2] != labelUntraced {
						t += s.Value
					}
				}
			}
			return t
		}
		for kname, pname := range map[string]string{
			"cupti_kernel_sampled_seconds_total":   "cupti_pod_sampled_seconds_total",
			"cupti_kernel_pcie_bytes_total":        "cupti_pod_pcie_bytes_total",
			"cupti_kernel_sm_active_seconds_total": "cupti_pod_sm_active_seconds_total",
		} {
			// pods from kernel records add up to the traced kernels; the NVML estimates of
			// untraced processes are part of "(untraced)"
			if k, p := traced(kname), sum(snap, pname, gpu, "*", "*", "*", "*", sourceKernel); !near(k, p, 1e-9) {
				t.Fatalf("gpu %s: traced %s %v, pods %v", gpu, kname, k, p)
			}
			untraced, _ := value(snap, kname, gpu, "*", labelUntraced)
			if est := sum(snap, pname, gpu, "*", "*", "*", "*", sourceNVML); est > untraced*(1+1e-9)+1e-12 {
				t.Fatalf("gpu %s: NVML-estimated pods %s %v above (untraced) %v", gpu, pname, est, untraced)
			}
		}
		if tr, _ := value(snap, "cupti_attribution_seconds_total", gpu, "*", "traced"); !near(tr, traced("cupti_kernel_sampled_seconds_total"), 1e-9) {
			t.Fatalf("gpu %s: traced seconds %v, kernels %v", gpu, tr, traced("cupti_kernel_sampled_seconds_total"))
		}
		for _, f := range snap.Families {
			for _, s := range f.Samples {
				if s.Value < 0 {
					t.Fatalf("%s%v negative: %v", f.Desc.Name, s.LabelValues, s.Value)
				}
			}
		}
	}
}
