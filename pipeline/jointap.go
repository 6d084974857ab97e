//go:build jointap

package pipeline

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// A build for the GPU stages only (`go build -tags jointap`, scripts/gpu/prepare.sh): with
// CUPTI_EXPORTER_JOINTAP=FILE, `serve` writes everything its attribution join is given (the
// activity events as the aggregator passes them on, the PM batches, NVML's processes) to a
// recording, at the time the join gets it, so that a live run can be replayed offline
// (scripts/gpu/sharesim) exactly as it was joined. Release builds have no such variable.
func tapJoin(a *attribution.Attributor, devices []pmdata.Device, catalog []pmdata.CatalogEntry, logger *slog.Logger) joinFeed {
	plain := feedOf(a)
	path := os.Getenv("CUPTI_EXPORTER_JOINTAP")
	if path == "" {
		return plain
	}
	f, err := os.Create(path)
	if err != nil {
		logger.Warn("join tap off", "err", err)
		return plain
	}
	now := func() uint64 { return uint64(time.Now().UnixNano()) }
	w, err := recording.NewWriter(f, recording.Header{Created: time.Now().UTC().Format(time.RFC3339), Producer: "cupti-exporter join tap"}, now())
	if err == nil {
		err = w.WriteDevices(now(), devices)
	}
	if err == nil {
		err = w.WriteCatalog(now(), catalog)
	}
	if err != nil {
		logger.Warn("join tap off", "err", err)
		f.Close()
		return plain
	}
	logger.Warn("DIAGNOSTIC BUILD: recording the attribution join's input", "file", path)
	t := &joinTap{a: a, w: w, now: now, conns: map[*record.Process]uint64{}, log: logger}
	return joinFeed{activity: t, batches: t, processes: t}
}

// joinTap writes each input of the join, then hands it on.
type joinTap struct {
	a     *attribution.Attributor
	mu    sync.Mutex
	w     *recording.Writer
	now   func() uint64
	conns map[*record.Process]uint64
	err   bool
	log   *slog.Logger
}

// write runs fn on the writer and flushes, under the lock; the first error ends the tap.
func (t *joinTap) write(fn func(w *recording.Writer) error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err {
		return
	}
	err := fn(t.w)
	if err == nil {
		err = t.w.Flush()
	}
	if err != nil {
		t.err = true
		t.log.Warn("join tap stopped", "err", err)
	}
}

func (t *joinTap) conn(p *record.Process) uint64 { // t.mu is held
	id, ok := t.conns[p]
	if !ok {
		id = uint64(len(t.conns)) + 1
		t.conns[p] = id
	}
	return id
}

func (t *joinTap) ProcessConnected(p *record.Process, info activity.ProcessInfo) {
	t.write(func(w *recording.Writer) error {
		return w.WriteHello(t.now(), recording.ProcessEvent{Conn: t.conn(p), Process: p})
	})
	t.a.ProcessConnected(p, info)
}

func (t *joinTap) Records(p *record.Process, recs []record.Record) {
	t.write(func(w *recording.Writer) error {
		return w.WriteActivity(t.now(), recording.ActivityBatch{Conn: t.conn(p), Records: recs})
	})
	t.a.Records(p, recs)
}

func (t *joinTap) Coverage(p *record.Process, spans []record.Interval) {
	t.write(func(w *recording.Writer) error {
		return w.WriteCoverage(t.now(), recording.CoverageBatch{Conn: t.conn(p), Spans: spans})
	})
	t.a.Coverage(p, spans)
}

func (t *joinTap) ProcessDisconnected(p *record.Process) {
	t.write(func(w *recording.Writer) error { return w.WriteGoodbye(t.now(), t.conn(p)) })
	t.a.ProcessDisconnected(p)
}

func (t *joinTap) Add(b pmdata.Batch) {
	t.write(func(w *recording.Writer) error { return w.WriteBatch(t.now(), b) })
	t.a.Add(b)
}

func (t *joinTap) ObserveProcesses(o gpuprocs.Observation) {
	t.write(func(w *recording.Writer) error { return w.WriteProcesses(t.now(), o) })
	t.a.ObserveProcesses(o)
}
