package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// Demo serves the embedded demo recording, looping in real time.
func Demo(ctx context.Context, logger *slog.Logger, cfg *Config) error {
	logger.Info("the demo replays a recording: its GPU is idle for about the first 15 s of every loop, so kernel and memcpy histograms appear once the recorded workload starts")
	return serveRecording(ctx, logger, cfg, "serving the embedded demo recording (no GPU is used)",
		func(opts ...recording.ReplayOption) (*recording.Replayer, error) {
			r, err := recording.FromBytes(demo.Recording(), append(opts, recording.WithLoop(true), recording.WithSpeed(1))...)
			if err != nil {
				return nil, fmt.Errorf("reading the embedded demo recording: %w", err)
			}
			return r, nil
		})
}

// ReplayArgs is what `replay` is told besides the configuration.
type ReplayArgs struct {
	File  string  // the recording
	Speed float64 // 1: real time
	Loop  bool    // start over at the end
}

// Replay serves a recording file.
func Replay(ctx context.Context, logger *slog.Logger, cfg *Config, cl ReplayArgs) error {
	return serveRecording(ctx, logger, cfg, "replaying "+cl.File,
		func(opts ...recording.ReplayOption) (*recording.Replayer, error) {
			return recording.OpenFile(cl.File, append(opts, recording.WithLoop(cl.Loop), recording.WithSpeed(cl.Speed))...)
		})
}

// serveRecording serves a recording through the same pipeline as live sources: its PM
// samples into the PM aggregator, its activity records into the activity aggregator, its
// health snapshots (if any) as source "health".
func serveRecording(ctx context.Context, logger *slog.Logger, cfg *Config, msg string,
	open func(...recording.ReplayOption) (*recording.Replayer, error)) error {
	m, err := newMapper(cfg)
	if err != nil {
		return err
	}
	pm := pmSetup{mapper: m}
	// The recording is opened first (it feeds nothing before Run) so that the attribution
	// join, which needs its devices and catalog, can listen to the activity aggregator.
	sink := newActivitySink(nil)
	health := &replayHealth{}
	procs := func(o gpuprocs.Observation) { // NVML's processes into the join, as live
		if pm.attr != nil {
			pm.feed.processes.ObserveProcesses(o)
		}
	}
	r, err := open(recording.WithActivitySink(sink), recording.WithHealthSink(health.set), recording.WithProcessesSink(procs),
		recording.WithLogger(logger))
	if err != nil {
		return err
	}
	logRecording(logger, msg, r.Summary())
	if cfg.Web.EnablePMSamplingAPI {
		logger.Warn("--web.enable-pm-sampling-api has no effect: " + noSessionInRecording)
	}
	pm.src = r
	if r.Summary().HealthSnapshots > 0 {
		pm.health = health
	}
	budget := activity.NewBudget(int64(cfg.Activity.MemoryBudget))
	opts, err := pm.attribute(cfg, logger, budget, replayActivityOptions(cfg, pm.devices, budget))
	if err != nil {
		return err
	}
	act := pm.newActivity(opts)
	sink.agg = act
	return serveSources(ctx, logger, cfg, pm, act)
}

// replayActivityOptions are the activity aggregator's options for a replay: as live, where the
// recording has it. A process recorded through the socket keeps its verified or claimed identity,
// so its hello's pod labels it only as --activity.trust-hello-pods says, as it did live.
func replayActivityOptions(cfg *Config, devices func() []pmdata.Device, budget *activity.Budget) []activity.Option {
	return append(append(activityOptions(devices), budgetActivityOptions(cfg)...),
		activity.WithBudget(budget), activity.WithTrustHelloPods(cfg.Activity.TrustHelloPods))
}

func logRecording(logger *slog.Logger, msg string, s recording.Summary) {
	logger.Info(msg, "synthetic", s.Header.Synthetic, "created", s.Header.Created, "devices", len(s.Devices),
		"metrics", len(s.Catalog), "samples", s.Samples, "activity_records", s.ActivityRecords, "health_snapshots", s.HealthSnapshots, "process_observations", s.ProcessFrames,
		"seconds", float64(s.Last-s.First)/1e9, "complete", s.Complete)
	if s.Header.Synthetic {
		logger.Warn("the recording is SYNTHETIC: its values were generated, not measured on a GPU", "description", s.Header.Description)
	}
}

// activitySink feeds replayed activity events into an aggregator, one recorded
// connection to one *record.Process.
type activitySink struct {
	agg     *activity.Aggregator
	procs   map[uint64]*record.Process
	dropped map[uint64]uint64
}

func newActivitySink(a *activity.Aggregator) *activitySink {
	return &activitySink{agg: a, procs: map[uint64]*record.Process{}, dropped: map[uint64]uint64{}}
}

func (s *activitySink) Connect(conn uint64, p record.Process) {
	s.procs[conn] = &p
	s.agg.Connect(&p)
}

func (s *activitySink) Add(conn uint64, dropped uint64, recs []record.Record) {
	p := s.procs[conn]
	if p == nil { // records of a connection whose hello was not recorded
		p = &record.Process{PID: uint32(conn)}
		s.Connect(conn, *p)
		p = s.procs[conn]
	}
	if dropped > 0 {
		s.dropped[conn] += dropped
		s.agg.SenderDrops(p, map[string]uint64{"recorded": s.dropped[conn]})
	}
	s.agg.Add(p, recs)
}

func (s *activitySink) Coverage(conn uint64, spans []record.Interval) {
	if p := s.procs[conn]; p != nil {
		s.agg.Coverage(p, spans)
	}
}

func (s *activitySink) Disconnect(conn uint64) {
	if p := s.procs[conn]; p != nil {
		s.agg.Disconnect(p)
		delete(s.procs, conn)
	}
}
