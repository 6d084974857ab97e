package pmsample

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// pmDevice is one device's PM sampling as the sampling loop drives it. cuptiDevice implements
// it with the binding; tests script it. Every method runs on the device's locked goroutine.
type pmDevice interface {
	Enable() error
	SetConfig(group int) error
	// Start starts sampling and returns the CUPTI timestamp (ns) taken just before.
	Start() (uint64, error)
	Stop() error
	Disable() error
	// Decode decodes the hardware buffer into group's counter data, calls fn for every completed
	// sample (values nil when evaluation failed; fn must copy them) and resets the image, except
	// after a COUNTER_DATA_FULL stop, when the session must be recreated.
	Decode(group int, fn func(start, end uint64, values []float64)) (cupti.DecodeResult, error)
	Close()
}

// cuptiDevice is pmDevice over the binding: one host object, one config image per group
// (kept until Close, since CUPTI keeps the pointer until Disable), one session at a time and
// its counter data images (one per group, one fixed capacity).
type cuptiDevice struct {
	lib        *cupti.Lib
	dev        int
	host       *cupti.Host
	groups     []catalog.Group
	images     []*cupti.ConfigImage
	set        cupti.SetConfig
	triedTime  bool
	maxSamples int
	growth     float64       // periods added to the images allocated from now on (config.go, imageCapacity)
	decode     time.Duration // decode period, to size the image again after a backoff

	// planned without the counter availability image: refresh re-plans before the first session
	needAvail bool
	chip      string
	metricSet string // named single-pass set given to the host object (CUPTI 13.2+), or ""
	replan    func(catalog.MetricHost) (catalog.PlanResult, error)
	multiplex bool

	sess      *cupti.Session
	dec       *cupti.Decoder // the decoding thread (decoder), for the serial pipeline's decodes
	decFailed bool           // it could not start: decode on the sampling thread
	log       *slog.Logger
	data      []*cupti.CounterData
	data2     []*cupti.CounterData // the second image of each group (double pipeline)
	double    bool
	vals      []float64
	mu        sync.Mutex // guards calls, total: the double pipeline times calls on two threads

	// cost, for the performance report: time in CUPTI calls since the last takeCallTimes and
	// in all taken before, samples evaluated
	calls, total pmdata.CallTimes
	evaluated    int

	// split[g]: group g's last image was re-initialised while a sample was still being decoded
	// (populated > completed); the evaluating thread's
	split []bool

	// where the sample being evaluated sits, for the guard's rejection log (describeSample)
	decodes  atomic.Int64 // decodes of this session (the device thread)
	replaced atomic.Int64 // images replaced after a full decode, this session
	at       struct {     // the evaluating thread's
		index  int
		decode int64
		info   cupti.CounterDataInfo
		full   bool
	}
}

// incompleteSample is what Decode's fn gets as values for a sample it will not evaluate because
// a counter data image re-initialisation split its records (empty, not nil: nil is a failed
// evaluation).
var incompleteSample = []float64{}

// describeSample says where the sample being evaluated sits; it runs inside Evaluate's fn.
func (d *cuptiDevice) describeSample() []any {
	return []any{"sample_index", d.at.index, "image_completed", d.at.info.Completed, "image_populated", d.at.info.Populated,
		"image_capacity", d.at.info.Total, "decode_of_session", d.at.decode, "decode_full", d.at.full, "images_replaced", d.replaced.Load()}
}

// takeCallTimes returns the time spent in CUPTI calls since the last call and starts over.
func (d *cuptiDevice) takeCallTimes() pmdata.CallTimes {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.calls
	d.total.Decode += c.Decode
	d.total.SampleInfo += c.SampleInfo
	d.total.Evaluate += c.Evaluate
	d.total.Reset += c.Reset
	d.total.Session += c.Session
	d.calls = pmdata.CallTimes{}
	return c
}

func newCuptiDevice(lib *cupti.Lib, dev int, host *cupti.Host, groups []catalog.Group, c config) (*cuptiDevice, error) {
	d := &cuptiDevice{
		lib: lib, dev: dev, host: host, groups: groups, maxSamples: c.maxSamples(), decode: c.decodePeriod, multiplex: c.multiplex > 0, metricSet: c.metricSet,
		double: c.pipeline == PipelineDouble,
		set:    cupti.SetConfig{HardwareBufferSize: c.hardwareBuffer, Interval: uint64(c.interval.Nanoseconds()), Trigger: cupti.TriggerGPUTime},
	}
	images, err := configImages(host, groups)
	if err != nil {
		return nil, err
	}
	d.images = images
	return d, nil
}

func configImages(host *cupti.Host, groups []catalog.Group) ([]*cupti.ConfigImage, error) {
	var images []*cupti.ConfigImage
	for _, g := range groups {
		img, err := host.ConfigImage(g.Metrics)
		if err != nil {
			for _, img := range images {
				img.Free()
			}
			return nil, fmt.Errorf("building config image for %v: %w", g.Metrics, err)
		}
		images = append(images, img)
	}
	return images, nil
}

// refresh re-plans a device that was planned without the counter availability image (another
// profiler held the counters at start) once the image can be read, before its first session.
// Without the image CUPTI accepts metrics the device cannot collect (NVLink bytes on a GPU
// without NVLink peers), and such a session then yields no samples at all (seen on an H200).
// It returns the new groups, or nil when nothing was to be done.
func (d *cuptiDevice) refresh() ([]catalog.Group, error) {
	if !d.needAvail {
		return nil, nil
	}
	avail, err := d.lib.CounterAvailability(d.dev)
	if err != nil {
		return nil, classify(fmt.Errorf("reading counter availability of device %d: %w", d.dev, err))
	}
	host, err := d.lib.NewHostForSet(d.chip, d.metricSet, avail)
	if err != nil {
		return nil, fmt.Errorf("opening profiler host for %s: %w", d.chip, err)
	}
	plan, err := d.replan(catalog.NewHost(d.lib, host))
	if err != nil {
		host.Close()
		return nil, fmt.Errorf("planning metrics of device %d again: %w", d.dev, err)
	}
	groups := plan.Groups
	if !d.multiplex {
		groups = groups[:1]
	}
	images, err := configImages(host, groups)
	if err != nil {
		host.Close()
		return nil, err
	}
	for _, img := range d.images {
		img.Free()
	}
	_ = d.host.Close()
	d.host, d.images, d.groups, d.needAvail = host, images, groups, false
	return groups, nil
}

func (d *cuptiDevice) timeSession(t0 time.Time) { d.addTime(&d.calls.Session, t0) }

// addTime adds the time since t0 to one of d.calls.
func (d *cuptiDevice) addTime(c *time.Duration, t0 time.Time) {
	dt := time.Since(t0)
	d.mu.Lock()
	*c += dt
	d.mu.Unlock()
}

// setInterval changes the hardware interval of the next session (a backoff) and sizes its
// counter data images for it; call it between Disable and Enable.
func (d *cuptiDevice) setInterval(iv time.Duration) {
	d.set.Interval = uint64(iv.Nanoseconds())
	d.maxSamples = imageCapacity(d.decode, iv, d.growth)
}

// now reads cuptiGetTimestamp, the clock of the samples (time.Now if it fails).
func (d *cuptiDevice) now() uint64 {
	if ts, err := d.lib.Timestamp(); err == nil {
		return ts
	}
	return uint64(time.Now().UnixNano())
}

func (d *cuptiDevice) Enable() error {
	defer d.timeSession(time.Now())
	s, err := d.lib.Enable(d.dev)
	if err != nil {
		return classify(fmt.Errorf("enabling pm sampling on device %d: %w", d.dev, err))
	}
	d.sess = s
	d.decodes.Store(0)
	d.replaced.Store(0)
	d.split = nil // a new session has no sample split across images
	d.data = make([]*cupti.CounterData, len(d.groups))
	d.data2 = make([]*cupti.CounterData, len(d.groups))
	return nil
}

// SetConfig uses the GPU_TIME trigger (interval in ns) and falls back once, for good, to the
// SYSCLK trigger when the device refuses it (Turing, GA100): the interval then counts cycles of
// a clock between about 0.8 and 1.7 GHz, so the period is roughly the one asked for.
func (d *cuptiDevice) SetConfig(g int) error {
	defer d.timeSession(time.Now())
	err := d.sess.SetConfig(d.images[g], d.set)
	if err != nil && d.set.Trigger == cupti.TriggerGPUTime && !d.triedTime && !errors.Is(classify(err), errBusy) && !errors.Is(classify(err), errPrivileges) {
		d.triedTime = true
		alt := d.set
		alt.Trigger = cupti.TriggerSysClock
		if err2 := d.sess.SetConfig(d.images[g], alt); err2 == nil {
			d.set = alt
			return nil
		}
	}
	if err != nil {
		return classify(fmt.Errorf("configuring pm sampling on device %d: %w", d.dev, err))
	}
	d.triedTime = true
	if d.data[g] == nil {
		cd, err := d.sess.NewCounterData(d.groups[g].Metrics, d.maxSamples)
		if err != nil {
			return classify(fmt.Errorf("allocating counter data (%d samples) on device %d: %w", d.maxSamples, d.dev, err))
		}
		d.data[g] = cd
	}
	if d.double && d.data2[g] == nil {
		cd, err := d.sess.NewCounterData(d.groups[g].Metrics, d.maxSamples)
		if err != nil {
			return classify(fmt.Errorf("allocating a second counter data image (%d samples) on device %d: %w", d.maxSamples, d.dev, err))
		}
		d.data2[g] = cd
	}
	return nil
}

func (d *cuptiDevice) Start() (uint64, error) {
	ts, err := d.lib.Timestamp()
	if err != nil {
		return 0, fmt.Errorf("reading cupti timestamp: %w", err)
	}
	if err := d.sess.Start(); err != nil {
		return 0, classify(fmt.Errorf("starting pm sampling on device %d: %w", d.dev, err))
	}
	return ts, nil
}

func (d *cuptiDevice) Stop() error {
	if err := d.sess.Stop(); err != nil {
		return fmt.Errorf("stopping pm sampling on device %d: %w", d.dev, err)
	}
	return nil
}

// Disable ends the session and frees its counter data images.
func (d *cuptiDevice) Disable() error {
	if d.sess == nil {
		return nil
	}
	defer d.timeSession(time.Now())
	err := d.sess.Disable()
	d.sess = nil
	for _, cd := range append(d.data, d.data2...) {
		if cd != nil {
			cd.Free()
		}
	}
	d.data, d.data2 = nil, nil
	if err != nil {
		return fmt.Errorf("disabling pm sampling on device %d: %w", d.dev, err)
	}
	return nil
}

func (d *cuptiDevice) Decode(g int, fn func(start, end uint64, values []float64)) (cupti.DecodeResult, error) {
	if d.decoder() != nil {
		return d.decodeOffThread(g, fn)
	}
	res, err := d.DecodeInto(g, 0)
	if err != nil {
		return res, err
	}
	return res, d.Evaluate(g, 0, res.StopReason == cupti.StopCounterDataFull, fn)
}

// decoder is the device's decoding thread (cupti.Decoder), started at the first decode; nil
// where it could not start (logged once: the decodes then run call by call on this thread).
func (d *cuptiDevice) decoder() *cupti.Decoder {
	if d.dec == nil && !d.decFailed && d.sess != nil {
		dec, err := d.sess.NewDecoder()
		if err != nil {
			d.decFailed = true
			if d.log != nil {
				d.log.Warn("pm sampling: no decoding thread; decoding on the sampling thread", "device", d.dev, "err", err)
			}
			return nil
		}
		d.dec = dec
	}
	return d.dec
}

// decoderCPU is the CPU time the decoding thread has used: the decode thread's CPU (runner's
// deliver) is the sampling thread's and this together.
func (d *cuptiDevice) decoderCPU() time.Duration { return d.dec.CPU() }

// decodeOffThread is Decode on the decoding thread: DecodeInto and Evaluate's CUPTI calls in
// one batch there, their results handed to fn here in the same order and with the same
// meaning.
func (d *cuptiDevice) decodeOffThread(g int, fn func(start, end uint64, values []float64)) (cupti.DecodeResult, error) {
	cd := d.image(g, 0)
	skip := g < len(d.split) && d.split[g]
	b, err := d.dec.Run(d.sess, cd, d.host, skip)
	if err != nil {
		return cupti.DecodeResult{}, classify(fmt.Errorf("decoding pm samples on device %d: %w", d.dev, err))
	}
	d.decodes.Add(1)
	d.mu.Lock()
	d.calls.Decode += b.DecodeTime
	d.calls.SampleInfo += b.SampleInfo
	d.calls.Evaluate += b.Evaluate
	d.calls.Reset += b.ResetTime
	d.mu.Unlock()
	res := b.Decode
	if err := d.decodeError(res, b.DecodeErr); err != nil {
		return res, err
	}
	if b.InfoErr != nil {
		return res, fmt.Errorf("reading counter data info on device %d: %w", d.dev, b.InfoErr)
	}
	full := res.StopReason == cupti.StopCounterDataFull
	d.at.info, d.at.decode, d.at.full = b.Info, d.decodes.Load(), full
	for i := range b.Samples {
		d.at.index = i
		start, end, vals, timesErr, evalErr := b.Sample(i)
		switch {
		case timesErr != nil:
			fn(0, 0, nil)
		case i == 0 && skip:
			fn(start, end, incompleteSample) // Evaluate says why
		case evalErr != nil:
			fn(start, end, nil)
		default:
			d.evaluated++
			fn(start, end, vals)
		}
	}
	d.noteSplit(g, b.Info)
	if full {
		return res, d.replaceFullImage(g, 0)
	}
	if b.ResetErr != nil {
		return res, fmt.Errorf("resetting counter data on device %d: %w", d.dev, b.ResetErr)
	}
	return res, nil
}

func (d *cuptiDevice) image(g, slot int) *cupti.CounterData {
	if slot == 1 {
		return d.data2[g]
	}
	return d.data[g]
}

// DecodeInto decodes the hardware buffer into image slot (0, or 1 with the double pipeline)
// of group g.
func (d *cuptiDevice) DecodeInto(g, slot int) (cupti.DecodeResult, error) {
	cd := d.image(g, slot)
	t0 := time.Now()
	res, err := d.sess.Decode(cd)
	d.addTime(&d.calls.Decode, t0)
	d.decodes.Add(1)
	return res, d.decodeError(res, err)
}

// decodeError is a decode's failure (err, or the hardware buffer's overflow), classified; nil
// for a decode that succeeded.
func (d *cuptiDevice) decodeError(res cupti.DecodeResult, err error) error {
	if err == nil && !res.Overflow {
		return nil
	}
	if err == nil {
		err = errOverflow
	}
	return classify(fmt.Errorf("decoding pm samples on device %d: %w", d.dev, err))
}

// Evaluate evaluates every completed sample of image slot of group g and re-initialises the
// image, except after a decode that stopped full (full).
func (d *cuptiDevice) Evaluate(g, slot int, full bool, fn func(start, end uint64, values []float64)) error {
	cd := d.image(g, slot)
	var sampleInfo, evaluate time.Duration
	defer func() {
		d.mu.Lock()
		d.calls.SampleInfo += sampleInfo
		d.calls.Evaluate += evaluate
		d.mu.Unlock()
	}()
	info, err := cd.Info()
	if err != nil {
		return fmt.Errorf("reading counter data info on device %d: %w", d.dev, err)
	}
	if n := len(d.groups[g].Metrics); cap(d.vals) < n {
		d.vals = make([]float64, n)
	}
	vals := d.vals[:len(d.groups[g].Metrics)]
	d.at.info, d.at.decode, d.at.full = info, d.decodes.Load(), full
	for i := range info.Completed {
		d.at.index = i
		ts := time.Now()
		start, end, err := cd.SampleTimes(i)
		te := time.Now()
		sampleInfo += te.Sub(ts)
		if err != nil {
			fn(0, 0, nil)
			continue
		}
		if i == 0 && g < len(d.split) && d.split[g] {
			// The rest of a sample whose first records were in the image re-initialised at the
			// previous decode: evaluated alone it reads up to 4.3 times the truth (run AH).
			fn(start, end, incompleteSample)
			continue
		}
		err = d.host.Evaluate(cd, i, vals)
		evaluate += time.Since(te)
		if err != nil {
			fn(start, end, nil)
			continue
		}
		d.evaluated++
		fn(start, end, vals)
	}
	d.noteSplit(g, info)
	if full {
		return d.replaceFullImage(g, slot)
	}
	tr := time.Now()
	err = cd.Reset()
	d.addTime(&d.calls.Reset, tr)
	if err != nil {
		return fmt.Errorf("resetting counter data on device %d: %w", d.dev, err)
	}
	return nil
}

// noteSplit records whether group g's image, about to be re-initialised or replaced, holds a
// sample still being decoded (populated, not completed): the reset splits it, its remaining
// records become the next image's first sample, which must not be evaluated.
func (d *cuptiDevice) noteSplit(g int, info cupti.CounterDataInfo) {
	if len(d.split) <= g {
		d.split = append(d.split, make([]bool, g+1-len(d.split))...)
	}
	d.split[g] = info.Populated > info.Completed
}

// replaceFullImage replaces image slot of group g after a decode that stopped full: the real
// library refuses to re-initialise such an image (999 on an H200), but decodes into a fresh
// image of the same session (TestRealCounterDataCosts (b)), so the image is replaced instead of
// the session recreated, with more room.
func (d *cuptiDevice) replaceFullImage(g, slot int) error {
	d.growAfterFull()
	return d.replaceImage(g, slot)
}

// growAfterFull gives the images allocated from now on growSlack of a period more room (up to
// maxGrowth periods): a decode came so late that an image overflowed, and on a host that is late
// once (scrapes, other work) it is late again. Images in use keep their size until replaced.
func (d *cuptiDevice) growAfterFull() {
	if d.growth < maxGrowth {
		d.growth = min(d.growth+growSlack, maxGrowth)
		d.maxSamples = imageCapacity(d.decode, time.Duration(d.set.Interval), d.growth)
	}
}

// nextImageCapacity is the capacity, in samples, of the images allocated from now on.
func (d *cuptiDevice) nextImageCapacity() int { return d.maxSamples }

// replacesFullImages tells the runner that a full image does not end the session.
func (d *cuptiDevice) replacesFullImages() bool { return true }

// replaceImage frees image slot of group g, which a full decode left unusable, and allocates
// and initialises a fresh one in the same session.
func (d *cuptiDevice) replaceImage(g, slot int) error {
	defer d.timeSession(time.Now())
	cd, err := d.sess.NewCounterData(d.groups[g].Metrics, d.maxSamples)
	if err != nil {
		return fmt.Errorf("replacing a full counter data image on device %d: %w", d.dev, err)
	}
	d.replaced.Add(1)
	old := d.image(g, slot)
	if slot == 1 {
		d.data2[g] = cd
	} else {
		d.data[g] = cd
	}
	old.Free()
	return nil
}

func (d *cuptiDevice) Close() {
	_ = d.Disable()
	d.dec.Close()
	d.dec = nil
	for _, img := range d.images {
		img.Free()
	}
	d.images = nil
	if d.host != nil {
		_ = d.host.Close()
		d.host = nil
	}
}
