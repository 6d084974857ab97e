package aggregate

import (
	"cmp"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/pmsample/window"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// DefaultWindow is the span of the gauge window statistics when WithWindow sets none.
const DefaultWindow = 10 * time.Second

// Aggregator folds batches from a pmdata.Source into an immutable snapshot: counters into
// monotonic totals (value x scale summed), gauges into time-weighted window statistics, plus
// the self-metrics of PM sampling. Add may be called from several goroutines; Snapshot never
// blocks.
type Aggregator struct {
	mapper  *mapping.Mapper
	logger  *slog.Logger
	cfg     aggConfig
	devices map[int]pmdata.Device
	props   map[string]pmdata.Properties

	mu     sync.Mutex
	devs   map[int]*devAgg
	mapped map[string]*mapped // by Perfworks name; nil value: unmappable
	snap   atomic.Pointer[snapshot.Snapshot]
	// What one Add and one build reuse (a.mu held): a batch's per-metric state, and how many
	// families the previous build made.
	batchMetrics []*mapped
	batchSeries  []*series
	batchBuckets []window.Bucket
	nFamilies    int
}

type aggConfig struct {
	window  time.Duration
	refresh time.Duration
	now     func() time.Time
	status  func() []pmdata.DeviceStatus
	// The series an idle GPU does without by default (docs/sizing.md "An idle GPU").
	windowMin   bool // the _min_ gauges
	zeroReasons bool // every loss, drop and failure reason and sampling state, at 0 from the start
	timing      bool // the decode path's timings and the newest sample's time
}

// Option configures an Aggregator.
type Option func(*aggConfig)

// WithWindow sets the span of the gauge window statistics (default 10 s). Non-positive keeps it.
func WithWindow(d time.Duration) Option {
	return func(c *aggConfig) {
		if d > 0 {
			c.window = d
		}
	}
}

// WithStatus adds the per-device sampling state (cupti_pm_sampling_state) from f, typically
// (*pmsample.Sampler).Status.
func WithStatus(f func() []pmdata.DeviceStatus) Option {
	return func(c *aggConfig) { c.status = f }
}

// WithWindowMin also serves the window minimum of every gauge (the Min families of the
// mapping, cupti_*_min_ratio); off by default: no dashboard or alert reads them.
func WithWindowMin(on bool) Option {
	return func(c *aggConfig) { c.windowMin = on }
}

// WithZeroReasons serves every reason of the loss, drop and decode-failure counters and every
// sampling state from the start, at 0. Off by default: a reason's series appears at its first
// event, and cupti_pm_sampling_state has only the current state's series (value 1), which is
// all the dashboards and alerts compare.
func WithZeroReasons(on bool) Option {
	return func(c *aggConfig) { c.zeroReasons = on }
}

// WithTiming serves the decode path's timings (cupti_pm_cupti_call_seconds_total,
// cupti_pm_decode_duration_seconds, cupti_pm_decode_thread_cpu_seconds_total,
// cupti_pm_decode_gap_seconds) and cupti_pm_last_sample_timestamp_seconds; off by default: they
// measure the exporter's own work (docs/performance.md), not the GPU, and the decode-gap
// histogram alone is 21 series per GPU (samples its gaps cost are counted in
// cupti_pm_samples_lost_total either way).
func WithTiming(on bool) Option {
	return func(c *aggConfig) { c.timing = on }
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option {
	return func(c *aggConfig) { c.now = now }
}

type mapped struct {
	m      mapping.Metric
	labels []string // metric label values, in Desc.LabelNames order after the device labels
	kind   snapshot.Kind
}

type devAgg struct {
	labels []string // device label values
	// device labels plus one value (a reason, a call, a state, a metric), made once: every
	// snapshot shares them (snapshots are read-only)
	labelsWith map[string][]string
	series     map[string]*series
	order      []string // Perfworks names in first-seen order
	samples    uint64
	dropped    [len(dropReasons)]uint64
	// outOfRange counts the guard's rejections by check; a series appears with the first one
	outOfRange map[string]uint64
	failures   [len(failureReasons)]uint64
	lostNS     [len(pmdata.LostReasons)]float64 // ns without a delivered sample, by cause
	lostN      [len(pmdata.LostReasons)]float64 // samples those imply
	interval   time.Duration                    // newest Batch.Interval
	covered    window.Window                    // delivered sample time, for the coverage ratio
	uncovered  window.Window                    // lost time, for the coverage ratio
	overflows  uint64
	decode     float64 // seconds, last batch
	gaps       window.GapHistogram
	// seconds inside CUPTI calls, by cuptiCalls
	cuptiCalls [len(cuptiCalls)]float64
	threadCPU  float64 // seconds, decode thread
	firstNS    uint64  // start of the first aggregated sample
	lastNS     uint64  // end of the newest sample
	lastAdd    time.Time
	multiplex  map[string]*window.Window // observed time of multiplexed metrics
}

type series struct {
	labels []string // device and metric label values, made once (shared by every snapshot)
	total  float64
	start  time.Time
	win    window.Window
}

// New returns an aggregator for the devices and catalog of a source.
func New(m *mapping.Mapper, devices []pmdata.Device, catalog []pmdata.CatalogEntry, logger *slog.Logger, opts ...Option) *Aggregator {
	cfg := aggConfig{window: DefaultWindow, refresh: time.Second, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Aggregator{
		mapper: m, logger: logger.With("source", "pmsample"), cfg: cfg,
		devices: map[int]pmdata.Device{}, props: map[string]pmdata.Properties{},
		devs: map[int]*devAgg{}, mapped: map[string]*mapped{},
	}
	for _, d := range devices {
		a.devices[d.Index] = d
	}
	for _, e := range catalog {
		a.props[e.Name] = e.Properties
	}
	a.publish()
	return a
}

// Add folds one batch in and publishes a new snapshot. It is the sink of pmdata.Source.Run.
func (a *Aggregator) Add(b pmdata.Batch) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.dev(b.Device)
	d.lastAdd = a.cfg.now()
	d.countDrops(b)
	d.addLosses(b.Lost)
	d.addDecode(b)
	a.addSamples(d, b)
	a.build()
}

// countDrops counts the batch's samples decoded and not delivered, and its failed decodes.
func (d *devAgg) countDrops(b pmdata.Batch) {
	d.dropped[dropFirst] += uint64(b.DroppedFirst)
	d.dropped[dropInvalid] += uint64(b.SkippedInvalid)
	d.dropped[dropIncomplete] += uint64(b.Incomplete)
	for check, n := range b.Rejected {
		d.dropped[dropOutOfRange] += uint64(n)
		if d.outOfRange == nil {
			d.outOfRange = map[string]uint64{}
		}
		d.outOfRange[check] += uint64(n)
	}
	d.failures[failImageFull] += uint64(b.LostImageFull)
	d.failures[failOverflow] += uint64(b.Overflows)
	d.failures[failDecodeError] += uint64(b.DecodeErrors)
	d.overflows += uint64(b.Overflows)
}

// addLosses accounts the time without samples by cause; it moves the window on while nothing
// is sampled and counts against the coverage.
func (d *devAgg) addLosses(lost []pmdata.Loss) {
	all := window.Bucket{}
	for _, l := range lost {
		if l.End <= l.Start {
			continue
		}
		i := lostIndex(l.Reason)
		d.lostNS[i] += float64(l.End - l.Start)
		d.lostN[i] += l.Samples
		all.Add(l.Start, l.End, 0)
		d.lastNS = max(d.lastNS, l.End) // the window moves on while nothing is sampled
		if d.firstNS == 0 {
			d.firstNS = l.Start
		}
	}
	d.uncovered.Add(all)
}

// lostIndex is the index of a Loss reason in pmdata.LostReasons; an unknown one counts as gap.
func lostIndex(reason string) int {
	for i, r := range pmdata.LostReasons {
		if r == reason {
			return i
		}
	}
	return len(pmdata.LostReasons) - 1 // gap
}

// addDecode takes the decode path's interval and timings.
func (d *devAgg) addDecode(b pmdata.Batch) {
	if b.Interval > 0 {
		d.interval = b.Interval
	}
	if b.DecodeDuration > 0 {
		d.decode = b.DecodeDuration.Seconds()
	}
	if b.DecodeGap > 0 {
		d.gaps.Observe(b.DecodeGap.Seconds())
	}
	ct := b.CUPTITime
	d.threadCPU += b.ThreadCPU.Seconds()
	for i, t := range [...]time.Duration{ct.Decode, ct.SampleInfo, ct.Evaluate, ct.Reset, ct.Session} {
		d.cuptiCalls[i] += t.Seconds()
	}
}

// addSamples folds the batch's valid samples in: counters into their totals, gauges into one
// bucket each for their windows, every sample's span into the coverage and, for multiplexed
// metrics, their observed time.
func (a *Aggregator) addSamples(d *devAgg, b pmdata.Batch) {
	n := len(b.Metrics)
	ms := slices.Grow(a.batchMetrics[:0], n)[:n]
	ss := slices.Grow(a.batchSeries[:0], n)[:n]
	buckets := slices.Grow(a.batchBuckets[:0], n)[:n]
	a.batchMetrics, a.batchSeries, a.batchBuckets = ms, ss, buckets
	for j, name := range b.Metrics {
		ms[j], ss[j] = a.metric(name), nil
		if ms[j] != nil {
			ss[j] = d.get(name, ms[j])
		}
		buckets[j] = window.NewBucket()
	}
	observed := window.NewBucket()
	for _, s := range b.Samples {
		if !valid(s, len(b.Metrics)) {
			d.dropped[dropInvalid]++
			continue
		}
		d.samples++
		if d.firstNS == 0 || s.Start < d.firstNS {
			d.firstNS = s.Start
		}
		d.lastNS = max(d.lastNS, s.End)
		observed.Add(s.Start, s.End, 1)
		for j, v := range s.Values {
			m := ms[j]
			switch {
			case m == nil:
			case m.kind == snapshot.KindCounter:
				if ss[j].start.IsZero() {
					ss[j].start = time.Unix(0, int64(s.Start))
				}
				ss[j].total += v * m.m.Scale
			default:
				buckets[j].Add(s.Start, s.End, v)
			}
		}
	}
	d.covered.Add(observed)
	for j := range b.Metrics {
		if ss[j] != nil && ms[j].kind != snapshot.KindCounter {
			ss[j].win.Add(buckets[j])
		}
		if b.Multiplexed {
			w := d.multiplex[b.Metrics[j]]
			if w == nil {
				w = &window.Window{}
				d.multiplex[b.Metrics[j]] = w
			}
			w.Add(observed)
		}
	}
}

func valid(s pmdata.Sample, n int) bool {
	if s.End <= s.Start || len(s.Values) != n {
		return false
	}
	for _, v := range s.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

func (a *Aggregator) dev(i int) *devAgg {
	if d := a.devs[i]; d != nil {
		return d
	}
	dv, ok := a.devices[i]
	if !ok {
		dv = pmdata.Device{Index: i}
	}
	d := &devAgg{
		labels:     []string{strconv.Itoa(dv.Index), dv.UUID, dv.Model, dv.Chip, dv.PCIBusID},
		series:     map[string]*series{},
		multiplex:  map[string]*window.Window{},
		labelsWith: map[string][]string{},
	}
	a.devs[i] = d
	return d
}

func (d *devAgg) get(name string, m *mapped) *series {
	s := d.series[name]
	if s == nil {
		s = &series{labels: slices.Clip(lbl(d.labels, m.labels...))}
		d.series[name] = s
		d.order = append(d.order, name)
	}
	return s
}

// with is the device's label values followed by v, made once per value.
func (d *devAgg) with(v string) []string {
	l, ok := d.labelsWith[v]
	if !ok {
		l = slices.Clip(lbl(d.labels, v))
		d.labelsWith[v] = l
	}
	return l
}

// metric maps a Perfworks name once; an unmappable name is logged once and left out.
func (a *Aggregator) metric(name string) *mapped {
	if m, ok := a.mapped[name]; ok {
		return m
	}
	p, ok := a.props[name]
	if !ok {
		a.logger.Warn("metric absent from the source catalog; properties guessed from nothing", "metric", name)
	}
	mm, err := a.mapper.Map(name, p)
	if err != nil || mm.Desc == nil {
		a.logger.Warn("metric left out: no mapping", "metric", name, "err", err)
		a.mapped[name] = nil
		return nil
	}
	res := &mapped{m: mm, kind: mm.Desc.Kind}
	for _, l := range mm.Labels {
		res.labels = append(res.labels, l.Value)
	}
	a.mapped[name] = res
	return res
}

// Snapshot returns the newest snapshot without blocking. A snapshot older than a second is
// rebuilt first when no Add holds the lock (so paused devices and expired windows show).
func (a *Aggregator) Snapshot() *snapshot.Snapshot {
	s := a.snap.Load()
	if a.cfg.now().Sub(s.Time) >= a.cfg.refresh && a.mu.TryLock() {
		a.build()
		a.mu.Unlock()
		s = a.snap.Load()
	}
	return s
}

func (a *Aggregator) publish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.build()
}

// families collects a snapshot's families while it is built: list is the snapshot's, made at
// the previous build's count; a family's samples start with room for one a device.
type families struct {
	index   map[*snapshot.Desc]int
	list    []snapshot.Family
	devices int
}

func newFamilies(n, devices int) *families {
	return &families{index: make(map[*snapshot.Desc]int, n), list: make([]snapshot.Family, 0, n), devices: devices}
}

func (fams *families) putSample(desc *snapshot.Desc, s snapshot.Sample) {
	i, ok := fams.index[desc]
	if !ok {
		i = len(fams.list)
		fams.index[desc] = i
		fams.list = append(fams.list, snapshot.Family{Desc: desc, Samples: make([]snapshot.Sample, 0, fams.devices)})
	}
	fams.list[i].Samples = append(fams.list[i].Samples, s)
}

func (fams *families) put(desc *snapshot.Desc, labels []string, v float64, start time.Time) {
	fams.putSample(desc, snapshot.Sample{LabelValues: labels, Value: v, Start: start})
}

func lbl(dev []string, extra ...string) []string {
	return append(slices.Clone(dev), extra...)
}

// build makes and publishes a snapshot; a.mu is held.
func (a *Aggregator) build() {
	now := a.cfg.now()
	fams := newFamilies(a.nFamilies, max(len(a.devs), 1))
	for _, idx := range sortedKeys(a.devs) {
		d := a.devs[idx]
		cutoff := sub(d.lastNS, a.cfg.window)
		stale := now.Sub(d.lastAdd) > a.cfg.window
		a.putMetrics(fams, d, cutoff, stale)
		a.putCounts(fams, d)
		d.putCoverage(fams, cutoff, stale)
		if a.cfg.timing {
			d.putTiming(fams)
		}
	}
	a.putStates(fams)
	a.nFamilies = len(fams.list)
	snap := &snapshot.Snapshot{Time: now, Families: fams.list}
	for _, f := range snap.Families {
		slices.SortFunc(f.Samples, func(x, y snapshot.Sample) int { return slices.Compare(x.LabelValues, y.LabelValues) })
	}
	slices.SortFunc(snap.Families, func(x, y snapshot.Family) int { return cmp.Compare(x.Desc.Name, y.Desc.Name) })
	a.snap.Store(snap)
}

// putMetrics puts the device's sampled metrics: counter totals, and the window mean, max (and
// min) of gauges and the observed share of multiplexed metrics unless the window is empty or
// the device stale.
func (a *Aggregator) putMetrics(fams *families, d *devAgg, cutoff uint64, stale bool) {
	for _, name := range d.order {
		m, s := a.mapped[name], d.series[name]
		labels := s.labels
		if m.kind == snapshot.KindCounter {
			fams.put(m.m.Desc, labels, s.total, s.start)
			continue
		}
		s.win.Expire(cutoff)
		mean, hi, lo, _, ok := s.win.Stats()
		if !ok || stale {
			continue
		}
		fams.put(m.m.Desc, labels, mean*m.m.Scale, time.Time{})
		if m.m.Max != nil {
			fams.put(m.m.Max, labels, hi*m.m.Scale, time.Time{})
		}
		if m.m.Min != nil && a.cfg.windowMin {
			fams.put(m.m.Min, labels, lo*m.m.Scale, time.Time{})
		}
	}
	span := float64(min(a.cfg.window, time.Duration(d.lastNS-d.firstNS)))
	for _, name := range sortedKeys(d.multiplex) {
		w := d.multiplex[name]
		w.Expire(cutoff)
		if _, _, _, dur, ok := w.Stats(); ok && span > 0 && !stale {
			fams.put(observedDesc, d.with(name), min(dur/span, 1), time.Time{})
		}
	}
}

// putCounts puts the device's sample, drop, failure and loss counters: a reason's series from
// its first event on (WithZeroReasons: from the start).
func (a *Aggregator) putCounts(fams *families, d *devAgg) {
	fams.put(samplesDesc, d.labels, float64(d.samples), time.Time{})
	zero := a.cfg.zeroReasons
	for r, n := range d.dropped {
		if n > 0 || zero {
			fams.put(droppedDesc, d.with(dropReasons[r]), float64(n), time.Time{})
		}
	}
	for _, check := range sortedKeys(d.outOfRange) {
		fams.put(outOfRangeDesc, d.with(check), float64(d.outOfRange[check]), time.Time{})
	}
	for r, n := range d.failures {
		if n > 0 || zero {
			fams.put(decodeFailuresDesc, d.with(failureReasons[r]), float64(n), time.Time{})
		}
	}
	for r := range pmdata.LostReasons {
		if d.lostNS[r] == 0 && d.lostN[r] == 0 && !zero {
			continue
		}
		fams.put(lostSamplesDesc, d.with(pmdata.LostReasons[r]), d.lostN[r], time.Time{})
		fams.put(lostSecondsDesc, d.with(pmdata.LostReasons[r]), d.lostNS[r]/1e9, time.Time{})
	}
	if d.overflows > 0 || zero {
		fams.put(overflowsDesc, d.labels, float64(d.overflows), time.Time{})
	}
}

// putCoverage puts the share of the window delivered samples cover, and the interval in effect.
func (d *devAgg) putCoverage(fams *families, cutoff uint64, stale bool) {
	d.covered.Expire(cutoff)
	d.uncovered.Expire(cutoff)
	_, _, _, cov, okc := d.covered.Stats()
	_, _, _, unc, oku := d.uncovered.Stats()
	if (okc || oku) && !stale {
		fams.put(coverageDesc, d.labels, cov/(cov+unc), time.Time{})
	}
	if d.interval > 0 {
		fams.put(intervalDesc, d.labels, d.interval.Seconds(), time.Time{})
	}
}

// putTiming puts the decode path's timings and the newest sample's time (WithTiming).
func (d *devAgg) putTiming(fams *families) {
	if d.gaps.Count() > 0 {
		fams.putSample(decodeGapDesc, snapshot.Sample{LabelValues: d.labels, Histogram: d.gaps.Value()})
	}
	fams.put(decodeDesc, d.labels, d.decode, time.Time{})
	for i, sec := range d.cuptiCalls {
		fams.put(cuptiCallDesc, d.with(cuptiCalls[i]), sec, time.Time{})
	}
	if d.threadCPU > 0 {
		fams.put(threadCPUDesc, d.labels, d.threadCPU, time.Time{})
	}
	if d.lastNS > 0 {
		fams.put(lastSampleDesc, d.labels, float64(d.lastNS)/1e9, time.Time{})
	}
}

// putStates puts every device's sampling state (WithStatus): the current one's series, or all.
func (a *Aggregator) putStates(fams *families) {
	if a.cfg.status == nil {
		return
	}
	for _, st := range a.cfg.status() {
		d := a.dev(st.Device)
		for _, s := range pmdata.States {
			if st.State == s || a.cfg.zeroReasons {
				fams.put(stateDesc, d.with(string(s)), b2f(st.State == s), time.Time{})
			}
		}
	}
}

func sub(ns uint64, d time.Duration) uint64 {
	if ns < uint64(d) {
		return 0
	}
	return ns - uint64(d)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
