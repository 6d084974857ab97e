package attribution

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
)

// groundTruth is a timeline of two kernel classes with known rates, back to back with some
// idle gaps: "stream" moves 1,000 bytes per ms at 100 % SM active, "spin" moves none at 40 %.
type groundTruth struct {
	recs              []activity.Record
	truthBytes        float64 // bytes of stream kernels
	truthSM, truthSpn float64 // SM active seconds of stream and spin kernels
}

func makeGroundTruth(rng *rand.Rand, span, meanLen int64) groundTruth {
	var g groundTruth
	t := t0
	for t < t0+span {
		l := meanLen/2 + rng.Int64N(meanLen)
		if rng.IntN(2) == 0 {
			g.recs = append(g.recs, kernel(0, "stream", t, t+l))
			g.truthBytes += 1000 * float64(l) / float64(ms)
			g.truthSM += float64(l) / 1e9
		} else {
			g.recs = append(g.recs, kernel(0, "spin", t, t+l))
			g.truthSpn += 0.4 * float64(l) / 1e9
		}
		t += l
		if rng.IntN(4) == 0 {
			t += rng.Int64N(meanLen) // idle
		}
	}
	return g
}

// valueAt computes a sample's values from the ground truth.
func (g groundTruth) valueAt(s, e int64) []float64 {
	var bytes, active float64
	for _, r := range g.recs {
		ov := float64(max(0, min(e, int64(r.End))-max(s, int64(r.Start))))
		if r.Name == "stream" {
			bytes += 1000 * ov / float64(ms)
			active += ov
		} else {
			active += 0.4 * ov
		}
	}
	return []float64{100 * active / float64(e-s), bytes}
}

// runGroundTruth feeds the timeline in 100 ms batches with the records a step ahead, and
// returns the relative errors of the stream kernel's bytes and both kernels' SM seconds.
func runGroundTruth(t testing.TB, est string, g groundTruth, span int64) (bytesErr, smErr, spinErr float64) {
	a, clk := newTest(t, WithEstimator(est), WithWatermark(300*time.Millisecond))
	p, info := newProc(1, "", "0")
	clk.set(t0 - ms)
	a.ProcessConnected(p, info)
	a.Coverage(p, []activity.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 2*span)}})
	step := 100 * ms
	ri := 0
	for now := t0; now < t0+span; now += step {
		clk.set(now)
		var recs []activity.Record
		for ri < len(g.recs) && int64(g.recs[ri].Start) < now+2*step {
			recs = append(recs, g.recs[ri])
			ri++
		}
		a.Records(p, recs)
		a.AddBatch(pmsample.Batch{Device: 0, Metrics: testMetrics, Samples: samples(now, ms, int(step/ms), g.valueAt)})
	}
	a.Flush()
	snap := a.Snapshot()
	b, _ := value(snap, "cupti_kernel_pcie_bytes_total", "0", "GPU-aaaa", "stream", "rx")
	sm, _ := value(snap, "cupti_kernel_sm_active_seconds_total", "0", "GPU-aaaa", "stream")
	spin, _ := value(snap, "cupti_kernel_sm_active_seconds_total", "0", "GPU-aaaa", "spin")
	return b/g.truthBytes - 1, sm/g.truthSM - 1, spin/g.truthSpn - 1
}

// TestRateRemovesEdgeBias checks the estimator on kernels 2-3 sample intervals long: the
// overlap split gives a share of each straddling sample to the quiet neighbour (about
// 1/(3n) of a kernel's bytes, docs/attribution.md "Estimators"), the rate-weighted split must be well below that.
func TestRateRemovesEdgeBias(t *testing.T) {
	const span = 3 * int64(time.Second)
	g := makeGroundTruth(rand.New(rand.NewPCG(1, 2)), span, 2*ms)
	ob, osm, ospin := runGroundTruth(t, EstimatorOverlap, g, span)
	rb, rsm, rspin := runGroundTruth(t, EstimatorRate, g, span)
	t.Logf("relative error, overlap: bytes %+.4f, sm(stream) %+.4f, sm(spin) %+.4f", ob, osm, ospin)
	t.Logf("relative error, rate:    bytes %+.4f, sm(stream) %+.4f, sm(spin) %+.4f", rb, rsm, rspin)
	if math.Abs(ob) < 0.05 {
		t.Fatalf("the overlap split lost only %.3f of the stream kernel's bytes: the test does not exercise the edge bias", -ob)
	}
	if math.Abs(rb) > 0.01 || math.Abs(rb) > math.Abs(ob)/5 {
		t.Errorf("rate split bytes error %+.4f, want within 1 %% and well below the overlap split's %+.4f", rb, ob)
	}
	if math.Abs(rsm) > 0.01 || math.Abs(rspin) > 0.02 {
		t.Errorf("rate split SM active errors %+.4f (stream), %+.4f (spin), want within 1-2 %%", rsm, rspin)
	}
}
