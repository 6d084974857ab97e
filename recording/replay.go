package recording

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/guard"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// ActivitySink receives the activity events of a replay, in recording order, from the
// goroutine that runs Replayer.Run.
type ActivitySink interface {
	Connect(conn uint64, p record.Process)
	Add(conn uint64, dropped uint64, records []record.Record)
	// Coverage takes the spans connection conn traced (recordings of version 3 and later).
	Coverage(conn uint64, spans []record.Interval)
	Disconnect(conn uint64)
}

// HealthSink receives the health snapshots of a replay (recordings of version 4 and
// later), in recording order, from the goroutine that runs Replayer.Run. The snapshot is
// the sink's to keep.
type HealthSink func(*snapshot.Snapshot)

// ProcessesSink receives the NVML process observations of a replay (recordings of version
// 5 and later), in recording order, times shifted as sample times are, from the goroutine
// that runs Replayer.Run.
type ProcessesSink func(gpuprocs.Observation)

// Summary describes a whole recording; NewReplayer computes it by reading the file once.
type Summary struct {
	Header          Header
	Devices         []pmdata.Device
	Catalog         []pmdata.CatalogEntry
	Batches         int
	Samples         int
	Processes       int
	ActivityRecords int
	CoverageSpans   int
	HealthSnapshots int    // health frames
	ProcessFrames   int    // NVML process observations (processes frames)
	First, Last     uint64 // smallest and largest timestamp (frames, samples, records, spans), ns
	Complete        bool   // the end frame was seen
	// Truncated is the offset of a frame cut short at the end of the file (its writer was
	// killed, or it is still being written), 0 if none. Replay stops before it.
	Truncated int64
}

// Replayer replays a recording as a pmdata.Source.
type Replayer struct {
	open    func() (io.ReadCloser, error)
	sum     Summary
	speed   float64
	loop    bool
	sink    ActivitySink
	health  HealthSink
	procs   ProcessesSink
	logger  *slog.Logger
	nowFunc func() time.Time
	guards  guards // a recording is screened as live samples are (guard.Guard)
}

// ReplayOption configures a Replayer.
type ReplayOption func(*Replayer)

// WithSpeed sets the replay speed: 1 is real time, 10 ten times faster; 0 or less replays
// as fast as the sink takes it.
func WithSpeed(f float64) ReplayOption { return func(r *Replayer) { r.speed = f } }

// WithLoop makes Run start over at the end; timestamps are shifted by the recording's span
// on every pass so that they keep increasing.
func WithLoop(loop bool) ReplayOption { return func(r *Replayer) { r.loop = loop } }

// WithActivitySink sends the recorded activity events to s.
func WithActivitySink(s ActivitySink) ReplayOption { return func(r *Replayer) { r.sink = s } }

// WithHealthSink sends the recorded health snapshots to s.
func WithHealthSink(s HealthSink) ReplayOption { return func(r *Replayer) { r.health = s } }

// WithProcessesSink sends the recorded NVML process observations to s.
func WithProcessesSink(s ProcessesSink) ReplayOption { return func(r *Replayer) { r.procs = s } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) ReplayOption { return func(r *Replayer) { r.logger = l } }

// OpenFile returns a Replayer of the recording at path.
func OpenFile(path string, opts ...ReplayOption) (*Replayer, error) {
	r, err := NewReplayer(func() (io.ReadCloser, error) { return os.Open(path) }, opts...)
	if err != nil {
		return nil, fmt.Errorf("reading recording %s: %w", path, err)
	}
	return r, nil
}

// FromBytes returns a Replayer of an in-memory recording (for example an embedded one).
func FromBytes(b []byte, opts ...ReplayOption) (*Replayer, error) {
	return NewReplayer(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, opts...)
}

// NewReplayer reads the recording that open returns once, to check it whole and to learn
// its devices, catalog and span; Run opens it again for every pass.
func NewReplayer(open func() (io.ReadCloser, error), opts ...ReplayOption) (*Replayer, error) {
	r := &Replayer{open: open, speed: 1, logger: slog.New(slog.DiscardHandler), nowFunc: time.Now, guards: guards{}}
	for _, o := range opts {
		o(r)
	}
	sum, err := Summarize(open)
	if err != nil {
		return nil, err
	}
	if len(sum.Devices) == 0 {
		return nil, errors.New("recording has no devices frame")
	}
	r.sum = sum
	if sum.Truncated > 0 {
		r.logger.Warn("recording ends inside a frame (its writer was killed, or still writes it): replaying the whole frames before it",
			"truncated_at_byte", sum.Truncated)
	}
	return r, nil
}

// truncatedAt returns the offset of the frame err says was cut at the end of the file,
// or -1: a cut frame ends the recording, anything else is an error.
func truncatedAt(err error) int64 {
	var fe *FormatError
	if errors.As(err, &fe) && errors.Is(err, ErrTruncated) {
		return fe.Offset
	}
	return -1
}

// Summarize reads a whole recording and describes it.
func Summarize(open func() (io.ReadCloser, error)) (Summary, error) {
	f, err := open()
	if err != nil {
		return Summary{}, err
	}
	defer f.Close()
	rd, err := NewReader(f)
	if err != nil {
		return Summary{}, err
	}
	s := Summary{Header: rd.Header()}
	span := func(ts ...uint64) {
		for _, t := range ts {
			if t == 0 {
				continue
			}
			if s.First == 0 || t < s.First {
				s.First = t
			}
			if t > s.Last {
				s.Last = t
			}
		}
	}
	for ev := range rd.Events() {
		span(ev.Time)
		switch ev.Type {
		case FrameDevices:
			s.Devices = ev.Devices
		case FrameCatalog:
			s.Catalog = ev.Catalog
		case FrameBatch:
			s.Batches++
			s.Samples += len(ev.Batch.Samples)
			for _, x := range ev.Batch.Samples {
				span(x.Start, x.End)
			}
		case FrameHello:
			s.Processes++
		case FrameActivity:
			s.ActivityRecords += len(ev.Activity.Records)
			for _, x := range ev.Activity.Records {
				span(x.Start, x.End)
			}
		case FrameCoverage:
			s.CoverageSpans += len(ev.Coverage.Spans)
			for _, x := range ev.Coverage.Spans {
				span(x.Start, x.End)
			}
		case FrameHealth:
			s.HealthSnapshots++
			span(unixNano(ev.Health.Time))
		case FrameProcesses:
			s.ProcessFrames++
			span(ev.Procs.Start, ev.Procs.End)
		}
	}
	if err := rd.Err(); err != nil {
		off := truncatedAt(err)
		if off <= 0 {
			return Summary{}, err
		}
		s.Truncated = off
	}
	s.Complete = rd.Ended()
	return s, nil
}

// Summary describes the recording.
func (r *Replayer) Summary() Summary { return r.sum }

// Devices implements pmdata.Source.
func (r *Replayer) Devices() []pmdata.Device { return r.sum.Devices }

// Catalog implements pmdata.Source.
func (r *Replayer) Catalog() []pmdata.CatalogEntry { return r.sum.Catalog }

// Run implements pmdata.Source: it delivers the recorded batches (and activity events,
// to the sink) with timestamps shifted so that the first frame is now, paced by the speed.
// It returns nil at the end of the recording unless looping, and ctx.Err() when cancelled.
func (r *Replayer) Run(ctx context.Context, sink func(pmdata.Batch)) error {
	wallStart := r.nowFunc()
	offset := uint64(wallStart.UnixNano()) - r.sum.First
	step := r.sum.Last - r.sum.First + uint64(time.Millisecond)
	hc := newHealthCarry(offset)
	for pass := 0; ; pass++ {
		if err := r.pass(ctx, sink, offset, wallStart, hc); err != nil {
			return err
		}
		hc.endPass()
		if !r.loop {
			return nil
		}
		offset += step
		r.logger.Debug("replay starting over", "pass", pass+1)
	}
}

func (r *Replayer) pass(ctx context.Context, sink func(pmdata.Batch), offset uint64, wallStart time.Time, hc *healthCarry) error {
	f, err := r.open()
	if err != nil {
		return fmt.Errorf("opening recording: %w", err)
	}
	defer f.Close()
	rd, err := NewReader(f)
	if err != nil {
		return err
	}
	open := map[uint64]bool{}
	defer func() {
		if r.sink != nil {
			for c := range open {
				r.sink.Disconnect(c)
			}
		}
	}()
	for ev := range rd.Events() {
		if err := r.wait(ctx, wallStart, int64(ev.Time+offset)-wallStart.UnixNano()); err != nil {
			return err
		}
		switch ev.Type {
		case FrameBatch:
			b := *ev.Batch
			for i := range b.Samples {
				b.Samples[i].Start += offset
				b.Samples[i].End += offset
			}
			r.guards.of(r.sum.Devices, b.Device, b.Metrics).Screen(&b)
			sink(b)
		case FrameHello:
			if r.sink != nil {
				open[ev.Process.Conn] = true
				r.sink.Connect(ev.Process.Conn, *ev.Process.Process)
			}
		case FrameGoodbye:
			if r.sink != nil && open[ev.Process.Conn] {
				delete(open, ev.Process.Conn)
				r.sink.Disconnect(ev.Process.Conn)
			}
		case FrameActivity:
			if r.sink != nil {
				a := ev.Activity
				for i := range a.Records {
					a.Records[i].Start += offset
					a.Records[i].End += offset
				}
				r.sink.Add(a.Conn, a.Dropped, a.Records)
			}
		case FrameCoverage:
			if r.sink != nil {
				c := ev.Coverage
				for i := range c.Spans {
					c.Spans[i].Start += offset
					c.Spans[i].End += offset
				}
				r.sink.Coverage(c.Conn, c.Spans)
			}
		case FrameHealth:
			if r.health != nil {
				r.health(hc.shift(ev.Health, offset))
			}
		case FrameProcesses:
			if r.procs != nil {
				f := *ev.Procs
				f.Start += offset
				f.End += offset
				r.procs(f.Observation())
			}
		}
	}
	if err := rd.Err(); err != nil && truncatedAt(err) <= 0 {
		return err
	}
	return nil // a frame cut at the end (warned about in NewReplayer) ends the pass
}

// wait sleeps until the frame that is elapsed ns (recording time, since wallStart) past
// the start is due at the replay speed.
func (r *Replayer) wait(ctx context.Context, wallStart time.Time, elapsed int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.speed <= 0 || elapsed <= 0 {
		return nil
	}
	d := wallStart.Add(time.Duration(float64(elapsed) / r.speed)).Sub(r.nowFunc())
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// guards holds the guard.Guard of each device and metric set of a recording.
type guards map[string]*guard.Guard

func (g guards) of(devices []pmdata.Device, dev int, metrics []string) *guard.Guard {
	key := fmt.Sprint(dev, "\x00", metricSetKey(metrics))
	if gd, ok := g[key]; ok {
		return gd
	}
	chip := ""
	for _, d := range devices {
		if d.Index == dev {
			chip = d.Chip
		}
	}
	gd := guard.New(chip, metrics)
	g[key] = gd
	return gd
}
