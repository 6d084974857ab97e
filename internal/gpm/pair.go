// Package gpm holds the two NVML GPM (GPU Performance Monitoring, Hopper and newer) samples of
// one GPU, or of one MIG GPU instance, that its metrics are computed between: NVML gives a
// metric only for a pair of samples, the older first. The health source (cupti_gpm_* families),
// the idle controller (the wake signal of a released GPU) and gpmsource (the curated metrics
// from GPM) take samples this way.
package gpm

import (
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// calls serialises this process's GPM calls. Two goroutines sampling the same GPU at once (the
// idle controller's poll and gpmsource's fill of an idle-released GPU) got "In use by another
// client" from nvmlGpmSampleGet and then a segmentation fault inside it on an H100 (run CW),
// once their loops woke on the same timetable (internal/tick); apart, they met by chance.
var calls sync.Mutex

// Pair is a GPU's two GPM samples: each Take samples into one and, when the other holds the
// GPU's previous sample, asks for metrics between the two. Not safe for concurrent use.
type Pair struct {
	prev, cur nvml.GpmSample
	have      bool                   // prev holds the GPU's previous sample
	mg        nvml.GpmMetricsGetType // the request, reused: NVML's holds 477 metrics (19 KB)
}

// Alloc allocates the two samples of a Pair.
func Alloc(lib nvml.Interface) (*Pair, nvml.Return) {
	calls.Lock()
	defer calls.Unlock()
	prev, ret := lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	cur, ret := lib.GpmSampleAlloc()
	if ret != nvml.SUCCESS {
		prev.Free()
		return nil, ret
	}
	return &Pair{prev: prev, cur: cur}, nvml.SUCCESS
}

// Take samples dev. With a previous sample it asks lib for the metrics ids between the two and
// returns the request, whose Metrics[i] answers ids[i]; nil on a first sample. The request is
// the Pair's own, valid until the next Take. sampled is the sampling's return (on failure the
// next Take starts a new pair), asked the metrics call's.
func (p *Pair) Take(lib nvml.Interface, dev nvml.Device, ids ...nvml.GpmMetricId) (mg *nvml.GpmMetricsGetType, sampled, asked nvml.Return) {
	return p.take(lib, dev.GpmSampleGet, ids)
}

// TakeMIG is Take for the MIG GPU instance gi of dev, a GPU in MIG mode
// (nvmlGpmMigSampleGet): the metrics of the work of that instance alone.
func (p *Pair) TakeMIG(lib nvml.Interface, dev nvml.Device, gi int, ids ...nvml.GpmMetricId) (mg *nvml.GpmMetricsGetType, sampled, asked nvml.Return) {
	return p.take(lib, func(s nvml.GpmSample) nvml.Return { return dev.GpmMigSampleGet(gi, s) }, ids)
}

func (p *Pair) take(lib nvml.Interface, sample func(nvml.GpmSample) nvml.Return, ids []nvml.GpmMetricId) (mg *nvml.GpmMetricsGetType, sampled, asked nvml.Return) {
	if len(ids) > len(p.mg.Metrics) {
		ids = ids[:len(p.mg.Metrics)]
	}
	calls.Lock()
	defer calls.Unlock()
	if sampled = sample(p.cur); sampled != nvml.SUCCESS {
		p.have = false
		return nil, sampled, nvml.SUCCESS
	}
	asked = nvml.SUCCESS
	if p.have {
		mg = &p.mg
		*mg = nvml.GpmMetricsGetType{NumMetrics: uint32(len(ids)), Sample1: p.prev, Sample2: p.cur}
		for i, id := range ids {
			mg.Metrics[i].MetricId = uint32(id)
		}
		asked = lib.GpmMetricsGet(mg)
	}
	p.prev, p.cur, p.have = p.cur, p.prev, true
	return mg, sampled, asked
}

// Stale forgets the newer sample of the last Take, whose metrics showed that it saw no GPM
// refresh since the older one (GPM updates its counters every 100 ms; such a pair reads 0 for
// every activity and NaN for DRAM bandwidth): the next Take pairs with the older sample again,
// so that its metrics cover both intervals.
func (p *Pair) Stale() { p.prev, p.cur = p.cur, p.prev }

// Restart forgets the previous sample: the next Take begins a new pair (a sample from before a
// device reset or an idle release does not pair with one after it).
func (p *Pair) Restart() { p.have = false }

// Free releases both samples.
func (p *Pair) Free() {
	calls.Lock()
	defer calls.Unlock()
	p.prev.Free()
	p.cur.Free()
}
