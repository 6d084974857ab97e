package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/receiver"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
	"github.com/prometheus/common/version"
)

// RecordArgs is what `record` is told besides the configuration.
type RecordArgs struct {
	Output   string            // the file to write
	Duration time.Duration     // how long to record
	MaxSize  settings.ByteSize // stop when the file reaches this size; 0: no limit
}

// Record samples the GPUs (and, if enabled, receives activity records) for the given
// duration and writes everything to a recording.
func Record(ctx context.Context, logger *slog.Logger, cfg *Config, cl RecordArgs) error {
	if cl.Duration <= 0 {
		return fmt.Errorf("--duration must be positive, got %s", cl.Duration)
	}
	m, err := newMapper(cfg)
	if err != nil {
		return err
	}
	lib, err := cupti.Open(cupti.Options{LibraryPath: cfg.CUPTI.Library})
	if err != nil {
		return fmt.Errorf("record needs CUPTI and a GPU: %w", err)
	}
	defer lib.Close()
	s, err := pmsample.New(lib, m, logger, samplerOptions(cfg)...)
	if err != nil {
		return fmt.Errorf("setting up PM sampling: %w", err)
	}
	defer s.Close()

	f, err := os.Create(cl.Output)
	if err != nil {
		return fmt.Errorf("creating recording: %w", err)
	}
	host, _ := os.Hostname()
	now := func() uint64 { return uint64(time.Now().UnixNano()) }
	file := &sizedFile{File: f}
	w, err := recording.NewWriter(file, recording.Header{
		Created: time.Now().UTC().Format(time.RFC3339), Producer: "cupti-exporter " + version.Version, Host: host,
		IntervalNS: uint64(time.Duration(cfg.PMSample.Interval).Nanoseconds()),
	}, now())
	if err != nil {
		f.Close()
		return err
	}
	if err := errors.Join(w.WriteDevices(now(), s.Devices()), w.WriteCatalog(now(), s.Catalog())); err != nil {
		w.Close(now())
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, cl.Duration)
	defer cancel()
	var mu sync.Mutex
	var werr error
	var full bool // the file reached --max-size
	keep := func(err error) {
		mu.Lock()
		if werr == nil && err != nil {
			werr = err
			cancel()
		}
		if max := int64(cl.MaxSize); max > 0 && !full && file.written.Load() >= max {
			full = true
			logger.Warn("recording stopped: the file reached --max-size", "output", cl.Output, "max_size", cl.MaxSize)
			cancel()
		}
		mu.Unlock()
	}
	if cfg.Activity.Enabled {
		conns := map[*record.Process]uint64{}
		connID := func(p *record.Process) uint64 { // the recording's id of p; hello on first use
			mu.Lock()
			id, ok := conns[p]
			if !ok {
				id = uint64(len(conns)) + 1
				conns[p] = id
			}
			mu.Unlock()
			if !ok {
				keep(w.WriteHello(now(), recording.ProcessEvent{Conn: id, Process: p}))
			}
			return id
		}
		tap := func(p *record.Process, recs []record.Record) {
			keep(w.WriteActivity(now(), recording.ActivityBatch{Conn: connID(p), Records: recs}))
		}
		cov := processTap{
			coverage: func(p *record.Process, spans []record.Interval) {
				keep(w.WriteCoverage(now(), recording.CoverageBatch{Conn: connID(p), Spans: spans}))
			},
			// A replay ends the process's presence here; without it the process stays present
			// to the recording's end, and the join counts that time as untraced.
			gone: func(p *record.Process) {
				mu.Lock()
				id, ok := conns[p]
				mu.Unlock()
				if ok {
					keep(w.WriteGoodbye(now(), id))
				}
			},
		}
		budget := activity.NewBudget(int64(cfg.Activity.MemoryBudget))
		agg := activity.NewAggregator(append(liveActivityOptions(s.Devices, budget), activity.WithRecordTap(tap), activity.WithListener(cov))...)
		srv, err := receiver.NewServer(cfg.Activity.Socket, agg, logger, receiverOptions(cfg, budget)...)
		if err != nil {
			w.Close(now())
			return fmt.Errorf("%w (or pass --no-activity.enabled)", err)
		}
		go srv.Serve(ctx)
		defer srv.Close()
	}
	var healthDone <-chan int
	if cfg.Health.Enabled {
		src := newHealthSource(logger, cfg, s.Devices, health.WithProcessListener(health.ProcessListenerFunc(func(o gpuprocs.Observation) {
			keep(w.WriteProcesses(now(), o))
		})))
		srcDone := make(chan struct{})
		go func() { src.Run(ctx); close(srcDone) }()
		healthDone = recordHealth(ctx, src, time.Duration(cfg.Health.Interval), func(snap *snapshot.Snapshot) {
			keep(w.WriteHealth(now(), snap))
		}, srcDone)
	}
	logger.Info("recording", "output", cl.Output, "duration", cl.Duration, "devices", len(s.Devices()), "health", cfg.Health.Enabled)
	var batches int
	runErr := s.Run(ctx, func(b pmdata.Batch) {
		keep(w.WriteBatch(now(), b))
		keep(w.Flush())
		mu.Lock()
		batches++
		mu.Unlock()
	})
	if errors.Is(runErr, context.DeadlineExceeded) || errors.Is(runErr, context.Canceled) {
		runErr = nil
	}
	cancel() // PM sampling may end first (an error): stop the health recorder too
	snaps := 0
	if healthDone != nil {
		snaps = <-healthDone
	}
	err = errors.Join(runErr, werr, w.Close(now()))
	logger.Info("recording done", "output", cl.Output, "batches", batches, "health_snapshots", snaps,
		"bytes", file.written.Load(), "stopped_at_max_size", full, "err", err)
	return err
}

// sizedFile counts the bytes written to a recording (for --max-size).
type sizedFile struct {
	*os.File
	written atomic.Int64
}

func (f *sizedFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written.Add(int64(n))
	return n, err
}

// recordHealth writes every new snapshot of the health source (one per collection, so one
// per health interval) until ctx ends and the source has stopped (srcDone), then sends the
// number written on the channel it returns. It looks four times an interval, so no
// collection is missed; a snapshot without families (NVML not read yet, or missing) is
// not written.
func recordHealth(ctx context.Context, src interface{ Snapshot() *snapshot.Snapshot }, interval time.Duration,
	write func(*snapshot.Snapshot), srcDone <-chan struct{}) <-chan int {
	done := make(chan int, 1)
	go func() {
		var last *snapshot.Snapshot
		n := 0
		t := time.NewTicker(max(interval/4, time.Millisecond))
		defer t.Stop()
		for {
			if s := src.Snapshot(); s != last && s != nil && len(s.Families) > 0 {
				last = s
				write(s)
				n++
			}
			select {
			case <-ctx.Done():
				<-srcDone
				done <- n
				return
			case <-t.C:
			}
		}
	}()
	return done
}

// processTap is an activity.Listener that passes coverage spans and disconnections to
// functions (the recorder writes them); records reach the recorder through the record tap.
type processTap struct {
	coverage func(p *record.Process, spans []record.Interval)
	gone     func(p *record.Process)
}

func (processTap) ProcessConnected(*record.Process, activity.ProcessInfo) {}
func (processTap) Records(*record.Process, []record.Record)               {}
func (t processTap) Coverage(p *record.Process, spans []record.Interval)  { t.coverage(p, spans) }
func (t processTap) ProcessDisconnected(p *record.Process)                { t.gone(p) }
