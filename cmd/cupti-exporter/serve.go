package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/receiver"
	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/podresources"
)

// runServe samples this host's GPUs. Without CUPTI (or with PM sampling disabled) it still
// serves activity and self metrics, and /readyz and the logs say why PM sampling is off.
func runServe(ctx context.Context, logger *slog.Logger, cfg *Config) error {
	m, err := newMapper(cfg)
	if err != nil {
		return err
	}
	var (
		src    pmsample.Source
		pause  http.Handler
		status func() []exporter.Status
		off    string
	)
	switch {
	case !cfg.PMSample.Enabled:
		off = "PM sampling disabled by configuration (pmsample.enabled=false)"
	default:
		lib, err := cupti.Open(cupti.Options{LibraryPath: cfg.CUPTI.Library})
		if err != nil {
			off = fmt.Sprintf("PM sampling is off: %v", err)
			break
		}
		defer lib.Close()
		s, err := pmsample.New(lib, m, logger, samplerOptions(cfg)...)
		if err != nil {
			return fmt.Errorf("setting up PM sampling: %w", err)
		}
		defer s.Close()
		src, pause, status = s, s.Handler(), func() []exporter.Status { return samplerStatus(s.Status()) }
	}
	if off != "" {
		logger.Warn(off)
	}
	act := activity.NewAggregator(activityOptions()...)
	if !cfg.Activity.Enabled {
		return serveSources(ctx, logger, cfg, src, pause, off, act, status)
	}
	srv, err := receiver.NewServer(cfg.Activity.Socket, act, logger, receiver.WithSocketMode(cfg.activitySocketMode()))
	if err != nil {
		return fmt.Errorf("%w (set --activity.socket, or --no-activity.enabled)", err)
	}
	defer srv.Close()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx) }()
	logger.Info("receiving activity records", "socket", srv.Path())
	err = serveSources(ctx, logger, cfg, src, pause, off, act, status)
	srv.Close()
	return errors.Join(err, <-errc)
}

// serveSources runs the PM source (nil when off, with off saying why) into its aggregator,
// registers both aggregators with the exporter, serves HTTP and pushes OTLP until ctx ends.
func serveSources(ctx context.Context, logger *slog.Logger, cfg *Config, src pmsample.Source, pause http.Handler,
	off string, act *activity.Aggregator, status func() []exporter.Status) error {
	m, err := newMapper(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		expOpts []exporter.Option
		pods    *podresources.Client
	)
	if sock := cfg.Kubelet.PodResourcesSocket; sock != "" {
		if pods, err = podresources.New(sock, podresources.WithLogger(logger)); err != nil {
			return fmt.Errorf("setting up pod attribution: %w", err)
		}
		defer pods.Close()
		go pods.Run(ctx)
		expOpts = append(expOpts, exporter.WithDeviceLabeler(func(uuid string) (string, string, string) {
			pod, ns, ctr, _ := pods.Lookup(uuid)
			return pod, ns, ctr
		}))
		logger.Info("attributing GPUs to pods", "socket", sock)
	}
	exp := exporter.New(logger, expOpts...)
	exp.Register("activity", act)
	if pods != nil {
		exp.Register("podresources", pods)
	}
	srcErr := make(chan error, 1)
	switch {
	case src == nil:
		exp.RegisterStatus("pmsample", statusFunc(func() []exporter.Status {
			return []exporter.Status{{Source: "pmsample", Ready: false, Reason: off}}
		}))
	default:
		agg := pmsample.NewAggregator(m, src.Devices(), src.Catalog(), logger,
			pmsample.WithWindow(time.Duration(cfg.PMSample.Window)))
		exp.Register("pmsample", agg)
		var fed atomic.Bool
		if status == nil { // a recording: ready once its first batch is in
			status = func() []exporter.Status {
				if !fed.Load() {
					return []exporter.Status{{Source: "pmsample", Reason: "waiting for the first batch"}}
				}
				return []exporter.Status{{Source: "pmsample", Ready: true}}
			}
		}
		exp.RegisterStatus("pmsample", statusFunc(status))
		go func() {
			srcErr <- src.Run(ctx, func(b pmsample.Batch) {
				agg.Add(b)
				fed.Store(true)
			})
		}()
	}

	srv := exporter.NewServer(logger, exporter.ServerConfig{
		ListenAddresses: []string{cfg.Web.ListenAddress},
		WebConfigFile:   cfg.Web.ConfigFile,
		TelemetryPath:   cfg.Web.TelemetryPath,
		Registry:        exp.Registry(),
		Status:          exp,
	})
	if pause != nil {
		srv.Handle("/api/v1/pm-sampling/", pause)
	}
	if cfg.OTLP.Endpoint != "" {
		o, err := exporter.NewOTLP(ctx, exporter.OTLPConfig{
			Protocol: cfg.OTLP.Protocol, Endpoint: cfg.OTLP.Endpoint, Insecure: cfg.OTLP.Insecure,
			Headers: cfg.OTLP.Header, Interval: time.Duration(cfg.OTLP.Interval),
			Registerer: exp.Registry(), Logger: logger,
		}, exp.Producers()...)
		if err != nil {
			return fmt.Errorf("setting up OTLP push: %w", err)
		}
		defer func() {
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			if err := o.Shutdown(sctx); err != nil {
				logger.Warn("final OTLP push failed", "err", err)
			}
		}()
		logger.Info("pushing OTLP", "endpoint", cfg.OTLP.Endpoint, "protocol", cfg.OTLP.Protocol, "interval", cfg.OTLP.Interval)
	}

	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Run(ctx) }()
	select {
	case err := <-srvErr:
		cancel()
		return err
	case err := <-srcErr:
		if ctx.Err() != nil { // shutting down
			return <-srvErr
		}
		if err != nil {
			cancel()
			<-srvErr
			return fmt.Errorf("PM sample source: %w", err)
		}
		logger.Info("PM sample source finished; still serving its last values")
		return <-srvErr
	}
}

type statusFunc func() []exporter.Status

func (f statusFunc) Status() []exporter.Status { return f() }

// samplerStatus turns the sampler's device states into exporter readiness.
func samplerStatus(ds []pmsample.DeviceStatus) []exporter.Status {
	out := make([]exporter.Status, 0, len(ds))
	for _, d := range ds {
		out = append(out, exporter.Status{Source: "pmsample", Device: strconv.Itoa(d.Device), Ready: d.Ready, Reason: d.Reason})
	}
	return out
}

// newMapper builds the metric mapper with the rules file's rules, if any.
func newMapper(cfg *Config) (*mapping.Mapper, error) {
	var rules []mapping.Rule
	if cfg.Mapping.RulesFile != "" {
		r, err := mapping.LoadRulesFile(cfg.Mapping.RulesFile)
		if err != nil {
			return nil, err
		}
		rules = r
	}
	return mapping.New(rules...)
}

func samplerOptions(cfg *Config) []pmsample.Option {
	opts := []pmsample.Option{
		pmsample.WithInterval(time.Duration(cfg.PMSample.Interval)),
		pmsample.WithDecodePeriod(time.Duration(cfg.PMSample.DecodePeriod)),
		pmsample.WithMultiplex(time.Duration(cfg.PMSample.Multiplex)),
	}
	if len(cfg.PMSample.Metrics) > 0 {
		opts = append(opts, pmsample.WithMetrics(cfg.PMSample.Metrics...))
	}
	return opts
}

func activityOptions() []activity.Option { return nil }
