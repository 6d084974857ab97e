package exporter_test

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// source publishes snapshots through an atomic pointer, as Producer requires.
type source struct {
	latest atomic.Pointer[mapping.Snapshot]
}

func (s *source) Snapshot() *mapping.Snapshot { return s.latest.Load() }

func (s *source) Status() []exporter.Status {
	return []exporter.Status{{Source: "demo", Device: "0", Ready: s.latest.Load() != nil, Reason: "no sample yet"}}
}

// Example wires one source to /metrics and to an OTLP collector.
func Example() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	src := &source{}
	e := exporter.New(logger, exporter.WithDeviceLabeler(func(uuid string) (pod, namespace, container string) {
		return "", "", "" // e.g. from a cache of kubelet's pod resources
	}))
	e.Register("demo", src)
	e.RegisterStatus("demo", src)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	otlp, err := exporter.NewOTLP(ctx, exporter.OTLPConfig{
		Protocol: "grpc", Endpoint: "localhost:4317", Insecure: true, Interval: 30 * time.Second,
		Registerer: e.Registry(), Logger: logger,
	}, e.Producers()...)
	if err != nil {
		logger.Error("start OTLP", "err", err)
		return
	}
	defer otlp.Shutdown(context.Background())

	srv := exporter.NewServer(logger, exporter.ServerConfig{
		ListenAddresses: []string{":9477"}, Registry: e.Registry(), Status: e,
	})
	if err := srv.Run(ctx); err != nil {
		logger.Error("serve", "err", err)
	}
}
