package activity

import (
	"slices"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var (
	kernelDurationDesc    = descs.Histogram("cupti_kernel_duration_seconds", "seconds", "cupti.kernel.duration", "s", "Duration of CUDA kernels by kernel name (top kernels by GPU time, the rest as kernel=\"other\"), and by GPU and pod where --activity.kernel-histogram.split says so (empty labels otherwise).", "gpu", "uuid", "namespace", "pod", "container", "kernel")
	kernelGPUSecondsDesc  = descs.Counter("cupti_kernel_gpu_seconds_total", "seconds", "cupti.kernel.time", "s", "GPU time spent in CUDA kernels by GPU and pod (sum of kernel durations; overlapping kernels add up).", "gpu", "uuid", "namespace", "pod", "container")
	podKernelDurationDesc = descs.Histogram("cupti_pod_kernel_duration_seconds", "seconds", "cupti.pod.kernel.duration", "s", "Duration of CUDA kernels by GPU and pod.", "gpu", "uuid", "namespace", "pod", "container")
)

// maxTrackedNames bounds the distinct mangled kernel names the ranking remembers; records
// of further names go to kernel="other" until a re-rank forgets idle names.
const maxTrackedNames = 4096

// otherKernel is the kernel label of every kernel outside the top set.
const otherKernel = "other"

// kernelRank is one shortened kernel name and its GPU time, for the top-K ranking.
type kernelRank struct {
	name   string
	window float64 // GPU seconds since the last re-rank
	score  float64 // decayed GPU seconds: halved at every re-rank, plus the window
	top    bool
}

type kernelKey struct {
	dev  *device
	pod  *podRef
	rank *kernelRank
}

type kernelSeries struct {
	h           *histogram
	start, last time.Time
}

// kernelTable keeps kernel-duration histograms for the top K kernel names by GPU time.
//
// A new name enters the top set at once while it has fewer than K members. Every re-rank
// interval each name's score becomes score/2 + GPU seconds in the interval, and the top
// set becomes the K names with the highest scores, where members count double: a newcomer
// must have twice a member's recent GPU time to replace it, so the set does not flap. A
// name that leaves loses its series (later records go to "other"); a name that enters
// starts a new series.
type kernelTable struct {
	k          int
	byMangled  map[string]*kernelRank
	byShort    map[string]*kernelRank
	other      *kernelRank
	members    int
	series     map[kernelKey]*kernelSeries
	lastRerank time.Time
	lastName   string // one-entry cache: batches repeat the same name
	lastRank   *kernelRank
	folded     uint64 // kernel records that went to "other": outside the top K
}

func (t *kernelTable) init(k int, now time.Time) {
	t.k = k
	t.byMangled = make(map[string]*kernelRank)
	t.byShort = make(map[string]*kernelRank)
	t.other = &kernelRank{name: otherKernel}
	t.series = make(map[kernelKey]*kernelSeries)
	t.lastRerank = now
}

// observe adds one kernel of the given duration to the series of (dev, pod, its rank); dev
// and pod are the Aggregator's node-wide placeholders where the histogram is not split so.
func (t *kernelTable) observe(dev *device, pod *podRef, mangled, short string, dur float64, bounds []float64, maxBuckets int, now time.Time) {
	r := t.rank(mangled, short)
	r.window += dur
	if !r.top {
		r = t.other
		t.folded++
	}
	key := kernelKey{dev, pod, r}
	s := t.series[key]
	if s == nil {
		s = &kernelSeries{h: newHistogram(bounds, maxBuckets), start: now}
		t.series[key] = s
	}
	s.last = now
	s.h.observe(dur)
}

// rank returns the ranking entry of a mangled name. short is its ShortKernelName, computed
// by the caller before it took the lock (names.go: the Aggregator's lock is never held while
// a name is shortened); "" when the caller skipped it because the table was full, and then
// a name the table does not know goes to "other".
func (t *kernelTable) rank(mangled, short string) *kernelRank {
	if t.lastRank != nil && mangled == t.lastName {
		return t.lastRank
	}
	r := t.byMangled[mangled]
	if r == nil {
		if len(t.byMangled) >= maxTrackedNames || short == "" {
			return t.other
		}
		if short == otherKernel {
			short = "other_" // keep the label of the merged series unambiguous
		}
		r = t.byShort[short]
		if r == nil {
			r = &kernelRank{name: short}
			if t.members < t.k {
				r.top = true
				t.members++
			}
			t.byShort[short] = r
		}
		t.byMangled[mangled] = r
	}
	t.lastName, t.lastRank = mangled, r
	return r
}

func (t *kernelTable) maybeRerank(now time.Time, interval time.Duration) {
	if now.Sub(t.lastRerank) >= interval {
		t.rerank(now)
	}
}

// rerank recomputes the top set (see kernelTable) and forgets names idle for long.
func (t *kernelTable) rerank(now time.Time) {
	t.lastRerank = now
	t.other.window = 0
	ranks := make([]*kernelRank, 0, len(t.byShort))
	for _, r := range t.byShort {
		r.score = r.score/2 + r.window
		r.window = 0
		ranks = append(ranks, r)
	}
	eff := func(r *kernelRank) float64 {
		if r.top {
			return 2 * r.score
		}
		return r.score
	}
	slices.SortFunc(ranks, func(x, y *kernelRank) int {
		if ex, ey := eff(x), eff(y); ex != ey {
			if ex > ey {
				return -1
			}
			return 1
		}
		return strings.Compare(x.name, y.name)
	})
	t.members = 0
	for i, r := range ranks {
		keep := i < t.k && (r.score > 0 || r.top)
		if r.top && !keep {
			for key := range t.series {
				if key.rank == r {
					delete(t.series, key)
				}
			}
		}
		r.top = keep
		if keep {
			t.members++
		}
	}
	for m, r := range t.byMangled {
		if !r.top && r.score < 1e-9 {
			delete(t.byMangled, m)
			delete(t.byShort, r.name)
		}
	}
	t.lastName, t.lastRank = "", nil
}

// families appends the kernel-duration family.
func (t *kernelTable) families(fs []snapshot.Family) []snapshot.Family {
	f := snapshot.Family{Desc: kernelDurationDesc, Samples: make([]snapshot.Sample, 0, len(t.series))}
	for k, s := range t.series {
		f.Samples = append(f.Samples, snapshot.Sample{
			LabelValues: []string{k.dev.gpu, k.dev.uuid, k.pod.namespace, k.pod.pod, k.pod.container, k.rank.name},
			Histogram:   s.h.value(),
			Start:       s.start,
		})
	}
	return append(fs, sorted(f))
}

// podKey identifies the series of one pod (or of processes outside pods: empty labels)
// on one device.
type podKey struct {
	dev *device
	pod *podRef
}

type podSeries struct {
	gpuSeconds  float64
	h           *histogram
	start, last time.Time
	refs        int // connected processes caching this series

	split    [numSplitStates]float64 // the time split (timesplit.go), seconds by state
	hasSplit bool
}

func (s *podSeries) observe(dur float64) {
	s.gpuSeconds += dur
	if s.h != nil {
		s.h.observe(dur)
	}
}

// podSeriesOf returns the pod series of ordinal on process ps, caching it in ps.
func (a *Aggregator) podSeriesOf(ps *procState, ordinal uint32, dev *device, now time.Time) *podSeries {
	cacheable := int64(ordinal) < int64(len(ps.pods))
	if cacheable && ps.pods[ordinal] != nil {
		return ps.pods[ordinal]
	}
	key := podKey{dev, ps.pod}
	s := a.podSeries[key]
	if s == nil {
		s = &podSeries{start: now}
		if a.cfg.podHistograms {
			s.h = newHistogram(a.cfg.buckets, a.cfg.maxBuckets)
		}
		a.podSeries[key] = s
	}
	s.last = now
	if cacheable {
		ps.pods[ordinal] = s
		s.refs++
	}
	return s
}

// podFamilies appends the per-pod GPU-time counter and duration histogram.
func (a *Aggregator) podFamilies(fs []snapshot.Family) []snapshot.Family {
	gpu := snapshot.Family{Desc: kernelGPUSecondsDesc}
	hist := snapshot.Family{Desc: podKernelDurationDesc}
	for k, s := range a.podSeries {
		labels := []string{k.dev.gpu, k.dev.uuid, k.pod.namespace, k.pod.pod, k.pod.container}
		// Under the exporter's cardinality cap, claimed pods' series fold first.
		gpu.Samples = append(gpu.Samples, snapshot.Sample{LabelValues: labels, Value: s.gpuSeconds, Start: s.start, Priority: k.pod.prio})
		if s.h != nil {
			hist.Samples = append(hist.Samples, snapshot.Sample{LabelValues: labels, Histogram: s.h.value(), Start: s.start, Priority: k.pod.prio})
		}
	}
	if !a.cfg.podHistograms {
		return append(fs, sorted(gpu))
	}
	return append(fs, sorted(gpu), sorted(hist))
}
