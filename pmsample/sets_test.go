//go:build cgo

package pmsample

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
)

func newSetSampler(t *testing.T, lib *cupti.Lib, set string) (*Sampler, error) {
	t.Helper()
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	return New(lib, m, slog.New(slog.DiscardHandler), WithMetricSet(set), WithInterval(time.Millisecond),
		WithDecodePeriod(20*time.Millisecond))
}

func TestSamplerFakeLibMetricSet(t *testing.T) {
	cuptitest.Build(t)
	cuptitest.Inject(t, "version=130200") // before Open: the Lib reads the version once
	lib := pmtest.OpenFake(t)
	s, err := newSetSampler(t, lib, "TriageCompute")
	if err != nil {
		t.Fatalf("New with a metric set: %v", err)
	}
	defer s.Close()
	if p := s.Plan(); len(p.Groups) != 1 || !slices.Equal(p.Groups[0].Metrics, pmtest.FakeTriageCompute) {
		t.Fatalf("plan = %+v, want the set's metrics as one group", p)
	}
	var names []string
	for _, e := range s.Catalog() {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, pmtest.FakeTriageCompute) {
		t.Errorf("catalog = %q", names)
	}
	c := &collector{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = s.Run(ctx, c.add)
		close(done)
	}()
	eventually(t, "samples of the set on both devices", func() bool { return c.sum(0, samplesOf) > 5 && c.sum(1, samplesOf) > 5 })
	cancel()
	<-done
	// The set's name reached HostInitialize (13.2's pSinglePassMetricSetName).
	if n := cuptitest.Query(t, "hosts.with_set"); n == 0 {
		t.Error("no profiler host was initialised with the single-pass set's name")
	}
	// Metric j of sample k is 10*(j+1) + k%10: the sixth metric is in [60, 69].
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.batches {
		if len(b.Samples) > 0 && !slices.Equal(b.Metrics, pmtest.FakeTriageCompute) {
			t.Fatalf("batch metrics = %q", b.Metrics)
		}
		for _, smp := range b.Samples {
			if len(smp.Values) != 6 || smp.Values[5] < 60 || smp.Values[5] > 69 {
				t.Fatalf("sample %+v off the fake's pattern", smp)
			}
		}
	}
	if n := cuptitest.Query(t, "sessions"); n != 0 {
		t.Errorf("%d sessions still enabled after Run", n)
	}
}

func TestSamplerFakeLibUnknownMetricSet(t *testing.T) {
	cuptitest.Build(t)
	cuptitest.Inject(t, "version=130200")
	lib := pmtest.OpenFake(t)
	_, err := newSetSampler(t, lib, "Triage")
	if err == nil || !strings.Contains(err.Error(), `"Triage"`) || !strings.Contains(err.Error(), "available: TriageCompute, Throughput") {
		t.Fatalf("New with an unknown set = %v; want the available sets", err)
	}
}

func TestSamplerFakeLibMetricSetNeeds132(t *testing.T) {
	lib := pmtest.OpenFake(t) // the fake reports 13.0 (130001)
	_, err := newSetSampler(t, lib, "TriageCompute")
	if !errors.Is(err, cupti.ErrNotSupported) || !errors.Is(err, catalog.ErrNoSinglePassSets) || !strings.Contains(err.Error(), "CUDA 13.2") {
		t.Fatalf("New with a set on CUPTI 13.0 = %v; want an error naming CUDA 13.2", err)
	}
	// A library of 13.2's version without the symbols says which functions it lacks.
	lib2, err := cupti.Open(cuptitest.BuildWithoutSinglePassSets(t))
	if err != nil {
		t.Fatal(err)
	}
	defer lib2.Close()
	_, err = newSetSampler(t, lib2, "TriageCompute")
	if !errors.Is(err, catalog.ErrNoSinglePassSets) || !strings.Contains(err.Error(), "cuptiProfilerHostGetSinglePassSets") {
		t.Fatalf("New with a set, symbols absent = %v", err)
	}
}
