package attribution

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// snapshotMaxAge is how old a snapshot may get before Snapshot tries to rebuild it (so the
// lag and the timed release of paused devices show without new batches).
const snapshotMaxAge = time.Second

// snapshotWait bounds how long Snapshot waits for a join that holds the lock (a chunk's join
// takes milliseconds). Without the wait, a scrape that met a join served the snapshot of the
// scrape before, and the first scrape an empty one: a one-shot scrape of a live run found
// every attribution series at 0 (run DC, docs/gpu-validation.md).
const snapshotWait = 100 * time.Millisecond

// Snapshot returns the newest snapshot, waiting at most snapshotWait: a snapshot older than
// a second, or one that batches, records, coverage or connections changed since, is rebuilt
// first (so it is built once per scrape, not once per batch).
func (a *Attributor) Snapshot() *snapshot.Snapshot {
	s := a.snap.Load()
	now := a.cfg.now()
	if !a.dirty.Load() && now.Sub(s.Time) < snapshotMaxAge {
		return s
	}
	if !a.tryLockFor(snapshotWait) { // a long join or a flood of records holds the lock: its gauges as they are now
		return a.withLiveGauges(s)
	}
	a.maintain(now)
	a.settle()
	a.build(now)
	a.mu.Unlock()
	return a.snap.Load()
}

// withLiveGauges is s with the held records and the memory as they are now (before, the
// pending records read 0 at every scrape of a flood that held the lock).
func (a *Attributor) withLiveGauges(s *snapshot.Snapshot) *snapshot.Snapshot {
	out := &snapshot.Snapshot{Time: s.Time, Families: slices.Clone(s.Families)}
	for i, f := range out.Families {
		switch f.Desc {
		case pendingDesc:
			devs := *a.devList.Load()
			f.Samples = make([]snapshot.Sample, 0, len(devs))
			for _, d := range devs {
				f.Samples = append(f.Samples, snapshot.Sample{LabelValues: d.labels, Value: float64(d.held.Load())})
			}
			sortSamples(f.Samples)
		case memoryDesc:
			f.Samples = []snapshot.Sample{{Value: float64(a.MemoryBytes())}}
		}
		out.Families[i] = f
	}
	return out
}

func sortSamples(ss []snapshot.Sample) {
	slices.SortFunc(ss, func(x, y snapshot.Sample) int {
		return slices.CompareFunc(x.LabelValues, y.LabelValues, strings.Compare)
	})
}

// build publishes a snapshot of the attributed totals; a.mu is held.
func (a *Attributor) build(now time.Time) {
	fams := map[*snapshot.Desc]*snapshot.Family{}
	var order []*snapshot.Desc
	prio := snapshot.PriorityNormal // of the samples put: a pod series's rank under the exporter's cap
	put := func(desc *snapshot.Desc, v float64, start time.Time, labels ...string) {
		f := fams[desc]
		if f == nil {
			f = &snapshot.Family{Desc: desc}
			fams[desc] = f
			order = append(order, desc)
		}
		f.Samples = append(f.Samples, snapshot.Sample{LabelValues: labels, Value: v, Start: start, Priority: prio})
	}
	counter := func(desc *snapshot.Desc, v float64, labels ...string) { put(desc, v, a.start, labels...) }
	gauge := func(desc *snapshot.Desc, v float64, labels ...string) { put(desc, v, time.Time{}, labels...) }
	ttl := a.cfg.seriesTTL
	for _, d := range a.devOrder {
		for label, c := range d.kernels {
			if now.Sub(c.last) > ttl {
				delete(d.kernels, label)
				continue
			}
			put(kernelSampledDesc, c.sampled, c.start, d.gpu, d.uuid, label)
			a.putMetrics(put, c, func(m *metric) *snapshot.Desc { return served(m.kernel, m.serveKernel) }, d.gpu, d.uuid, label)
		}
		for k, c := range d.pods {
			if now.Sub(c.last) > ttl {
				delete(d.pods, k)
				continue
			}
			prio = c.prio
			put(podSampledDesc, c.sampled, c.start, d.gpu, d.uuid, k.namespace, k.pod, k.container, k.source)
			if c.uncertain > 0 {
				put(podUncertainDesc, c.uncertain, c.start, d.gpu, d.uuid, k.namespace, k.pod, k.container, k.source)
			}
			a.putMetrics(put, c, func(m *metric) *snapshot.Desc { return served(m.pod, m.servePod) }, d.gpu, d.uuid, k.namespace, k.pod, k.container, k.source)
			prio = snapshot.PriorityNormal
		}
		for i, kind := range kindLabels {
			counter(kindSecondsDesc, d.kinds[i], d.gpu, d.uuid, kind)
		}
		for i, mode := range sharingLabels {
			if d.sharing[i] > 0 || a.cfg.zeroReasons {
				counter(sharingDesc, d.sharing[i], d.gpu, d.uuid, mode)
			}
		}
		lag := 0.0
		if d.newest > d.frontier && d.frontier > 0 {
			lag = float64(d.newest-d.frontier) / 1e9
		} else if d.frontier == 0 && len(d.samples) > 0 {
			lag = float64(d.newest-d.samples[0].start) / 1e9
		}
		gauge(lagDesc, lag, d.gpu, d.uuid)
		present := 0.0
		if d.sampledE > 0 {
			present = d.presentE / d.sampledE
		}
		gauge(untracedPresentDesc, present, d.gpu, d.uuid)
		if d.uncertainE > 0 && d.sampledE > 0 { // from the first estimated split on (an idle GPU's series budget)
			gauge(uncertainDesc, min(1, d.uncertainE/d.sampledE), d.gpu, d.uuid)
		}
		counter(lateRecordsDesc, float64(d.late), d.gpu, d.uuid)
		counter(lateSecondsDesc, d.lateSeconds, d.gpu, d.uuid)
		counter(joinSecondsDesc, d.joinSeconds, d.gpu, d.uuid)
		gauge(pendingDesc, float64(d.held.Load()), d.gpu, d.uuid)
		for i, r := range sampleDropReasons {
			if d.droppedSamples[i] > 0 || a.cfg.zeroReasons {
				counter(droppedSamplesDesc, float64(d.droppedSamples[i]), d.gpu, d.uuid, r)
			}
		}
	}
	for _, r := range reasons(recordDropReasons, a.dropped) {
		counter(droppedRecordsDesc, float64(a.dropped[r]), r)
	}
	for _, r := range reasons(foldReasons, a.folded) {
		counter(foldedClassesDesc, float64(a.folded[r]), r)
	}
	gauge(memoryDesc, float64(a.MemoryBytes()))
	for _, r := range reasons(coverageReasons, a.badCov) {
		counter(badCoverageDesc, float64(a.badCov[r]), r)
	}
	for _, r := range reasons(obsDropReasons, a.droppedObs) {
		counter(droppedObsDesc, float64(a.droppedObs[r]), r)
	}
	snap := &snapshot.Snapshot{Time: now, Families: make([]snapshot.Family, 0, len(order))}
	for _, desc := range order {
		f := fams[desc]
		sortSamples(f.Samples)
		snap.Families = append(snap.Families, *f)
	}
	slices.SortFunc(snap.Families, func(x, y snapshot.Family) int { return cmp.Compare(x.Desc.Name, y.Desc.Name) })
	a.dirty.Store(false)
	a.snap.Store(snap)
}

// putMetrics emits the attributed metrics of one series set.
func (a *Attributor) putMetrics(put func(*snapshot.Desc, float64, time.Time, ...string), c *acc,
	desc func(*metric) *snapshot.Desc, labels ...string) {
	for m, ok := range c.has {
		if !ok {
			continue
		}
		met := a.metrics[m]
		if d := desc(met); d != nil {
			put(d, c.vals[m], c.start, append(slices.Clone(labels), met.labels...)...)
		}
	}
}

// served is d when it is served, else nil.
func served(d *snapshot.Desc, ok bool) *snapshot.Desc {
	if !ok {
		return nil
	}
	return d
}

// reasons lists the fixed reasons and any other key of counts, sorted.
func reasons(fixed []string, counts map[string]uint64) []string {
	out := slices.Clone(fixed)
	for r := range counts {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// tryLockFor takes a.mu if it comes free within d, trying every lockRetry.
func (a *Attributor) tryLockFor(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !a.mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(lockRetry)
	}
	return true
}

// lockRetry is how often tryLockFor tries the lock.
const lockRetry = 500 * time.Microsecond
