package exporter

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
)

// devAttrs are the OTLP attributes of a device series: labels renamed, hw.type and hw.vendor added.
func devAttrs(gpu, uuid string, extra ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append([]attribute.KeyValue{
		attribute.String("cupti.gpu", gpu), attribute.String("hw.id", uuid), attribute.String("hw.model", "NVIDIA H200"),
		attribute.String("cupti.chip", "GH100"), attribute.String("cupti.pci_bus_id", "00000000:19:00.0"),
		attribute.String("hw.type", "gpu"), attribute.String("hw.vendor", "NVIDIA"),
	}, extra...)...)
}

// wantScope is what NewMetricProducer must make of pmSnapshot and activitySnapshot.
func wantScope() metricdata.ScopeMetrics {
	return metricdata.ScopeMetrics{
		Scope: instrumentation.Scope{Name: scopeName, Version: ServiceVersion()},
		Metrics: []metricdata.Metrics{
			{Name: "gpu.kernel.duration", Description: "Duration of kernels.", Unit: "s",
				Data: metricdata.ExponentialHistogram[float64]{Temporality: metricdata.CumulativeTemporality,
					DataPoints: []metricdata.ExponentialHistogramDataPoint[float64]{{
						Attributes: attribute.NewSet(attribute.String("hw.id", "GPU-aaaa"), attribute.String("cupti.process", "python3"),
							attribute.String("hw.type", "gpu"), attribute.String("hw.vendor", "NVIDIA")),
						StartTime: testStart, Time: testTime, Count: 4, Sum: 107.5, Scale: 0,
						// Prometheus indexes -1, 2, 7 are OTel indexes -2, 1, 6.
						PositiveBucket: metricdata.ExponentialBucket{Offset: -2, Counts: []uint64{1, 0, 0, 2, 0, 0, 0, 0, 1}},
					}}}},
			{Name: "gpu.memcpy.size", Description: "Size of memory copies.", Unit: "By",
				Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
					DataPoints: []metricdata.HistogramDataPoint[float64]{{
						Attributes: attribute.NewSet(attribute.String("cupti.kind", "htod")),
						StartTime:  testStart, Time: testTime, Count: 3, Sum: 5000,
						Bounds: []float64{1024, 4096}, BucketCounts: []uint64{1, 1, 1},
					}}}},
			{Name: "gpu.pcie.io", Description: "Bytes moved over PCIe.", Unit: "By",
				Data: metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
					DataPoints: []metricdata.DataPoint[float64]{
						{Attributes: devAttrs("0", "GPU-aaaa", attribute.String("network.io.direction", "receive")), StartTime: testStart, Time: testTime, Value: 1024},
						{Attributes: devAttrs("0", "GPU-aaaa", attribute.String("network.io.direction", "transmit")), StartTime: testStart, Time: testTime, Value: 2048},
					}}},
			{Name: "gpu.sm.active", Description: "Fraction of time SMs were active.", Unit: "1",
				Data: metricdata.Gauge[float64]{DataPoints: []metricdata.DataPoint[float64]{
					{Attributes: devAttrs("0", "GPU-aaaa"), Time: testTime, Value: 0.25},
					{Attributes: devAttrs("1", "GPU-bbbb"), Time: testTime, Value: 0.75},
					{Attributes: devAttrs("2", "GPU-cccc"), Time: testTime, Value: 0.5},
				}}},
		},
	}
}

func TestMetricProducer(t *testing.T) {
	p := NewMetricProducer(newFakeProducer(pmSnapshot()), &fakeProducer{}, newFakeProducer(activitySnapshot()))
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(p))
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 {
		t.Fatalf("%d scopes, want 1", len(rm.ScopeMetrics))
	}
	metricdatatest.AssertEqual(t, wantScope(), rm.ScopeMetrics[0])
}

func TestMetricProducerAttributionAndDrops(t *testing.T) {
	e := New(nil, WithoutRuntimeMetrics(), WithDeviceLabeler(DeviceLabelerFunc(func(string) (string, string, string) { return "train-0", "ml", "trainer" })))
	e.Register("pmsample", newFakeProducer(pmSnapshot()))
	e.Register("again", newFakeProducer(pmSnapshot())) // every series a duplicate
	mp := newMetricProducer(e.Producers(), NamingOTel, nil, nil, &dropCounter{})
	sm, err := mp.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := mp.drops.n[dropDuplicate].Load(); got != 4 {
		t.Errorf("%d duplicates dropped, want 4", got)
	}
	g := sm[0].Metrics[1].Data.(metricdata.Gauge[float64])
	// The workload under cupti.workload.*: the k8s.* keys are the resource's (the exporter's pod).
	want := devAttrs("0", "GPU-aaaa", attribute.String("cupti.workload.pod.name", "train-0"),
		attribute.String("cupti.workload.namespace.name", "ml"), attribute.String("cupti.workload.container.name", "trainer"))
	if len(g.DataPoints) != 2 || !g.DataPoints[0].Attributes.Equals(&want) {
		t.Errorf("gauge points %v, want 2 with attributes %v first", g.DataPoints, want.ToSlice())
	}
}

func TestExponentialBucket(t *testing.T) {
	for _, tc := range []struct {
		in   map[int]int64
		want metricdata.ExponentialBucket
	}{
		{nil, metricdata.ExponentialBucket{}},
		{map[int]int64{0: 0}, metricdata.ExponentialBucket{}},
		{map[int]int64{1: 3}, metricdata.ExponentialBucket{Offset: 0, Counts: []uint64{3}}},
		{map[int]int64{-3: 1, -1: 2}, metricdata.ExponentialBucket{Offset: -4, Counts: []uint64{1, 0, 2}}},
	} {
		got := exponentialBucket(tc.in)
		if got.Offset != tc.want.Offset || len(got.Counts) != len(tc.want.Counts) {
			t.Errorf("exponentialBucket(%v) = %+v, want %+v", tc.in, got, tc.want)
			continue
		}
		for i := range got.Counts {
			if got.Counts[i] != tc.want.Counts[i] {
				t.Errorf("exponentialBucket(%v) = %+v, want %+v", tc.in, got, tc.want)
			}
		}
	}
}

// TestOTelAttributeNeverResourceKey: no label becomes a key the resource carries (newResource
// sets k8s.pod.name, k8s.namespace.name and k8s.node.name of the exporter's own pod), so a
// data point never names a second pod under the resource's key.
func TestOTelAttributeNeverResourceKey(t *testing.T) {
	t.Setenv("NODE_NAME", "gpu-node-7")
	t.Setenv("POD_NAME", "cupti-exporter-x1")
	t.Setenv("POD_NAMESPACE", "monitoring")
	res, err := newResource(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	labels := []string{"pod", "namespace", "container", "node", "uuid", "model", "gpu", "kernel", "host", "service"}
	for l := range otelAttributeKeys {
		labels = append(labels, l)
	}
	for _, l := range labels {
		k, _ := OTelAttribute(l, "x")
		if _, ok := res.Set().Value(attribute.Key(k)); ok {
			t.Errorf("label %s becomes %s, a key of the resource", l, k)
		}
	}
	for l, want := range map[string]string{"pod": "cupti.workload.pod.name", "namespace": "cupti.workload.namespace.name",
		"container": "cupti.workload.container.name"} {
		if k, _ := OTelAttribute(l, "x"); k != want {
			t.Errorf("label %s becomes %s, want %s", l, k, want)
		}
	}
}
