package exporter_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// source publishes snapshots through an atomic pointer, as Producer requires.
type source struct {
	latest atomic.Pointer[snapshot.Snapshot]
}

func (s *source) Snapshot() *snapshot.Snapshot { return s.latest.Load() }

func (s *source) Status() []exporter.Status {
	return []exporter.Status{{Source: "demo", Device: "0", Ready: s.latest.Load() != nil, Reason: "no sample yet"}}
}

var smActive = &snapshot.Desc{
	Name: "cupti_sm_active_ratio", Help: "Share of cycles with an SM active.", Kind: snapshot.KindGauge, Unit: "ratio",
	OTelName: "cupti.sm.active", OTelUnit: "1", LabelNames: []string{"gpu"},
}

// Example wires one source to /metrics and /readyz, and to OpenTelemetry (NewOTLP
// pushes the same producers to a collector; a ManualReader reads them here).
func Example() {
	src := &source{}
	src.latest.Store(&snapshot.Snapshot{Time: time.Now(), Families: []snapshot.Family{
		{Desc: smActive, Samples: []snapshot.Sample{{LabelValues: []string{"0"}, Value: 0.42}}},
	}})
	e := exporter.New(nil, exporter.WithoutRuntimeMetrics())
	e.Register("demo", src)
	e.RegisterStatus("demo", src)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	srv := exporter.NewServer(nil, exporter.ServerConfig{
		ListenAddresses: []string{"127.0.0.1:0"}, Registry: e.Registry(), Status: e,
	})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	for srv.Addrs() == nil { // bound once Run has listened
		time.Sleep(time.Millisecond)
	}
	base := "http://" + srv.Addrs()[0].String()

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "cupti_sm_active_ratio") {
			fmt.Println(sc.Text())
		}
	}
	resp.Body.Close()
	if resp, err = http.Get(base + "/readyz"); err == nil {
		fmt.Println("readyz:", resp.StatusCode)
		resp.Body.Close()
	}
	stop()
	fmt.Println("server stopped:", <-done)

	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(exporter.NewMetricProducer(e.Producers()...)))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok {
				fmt.Println("otlp:", m.Name, g.DataPoints[0].Value)
			}
		}
	}
	// Output:
	// cupti_sm_active_ratio{gpu="0"} 0.42
	// readyz: 200
	// server stopped: <nil>
	// otlp: cupti.sm.active 0.42
}
