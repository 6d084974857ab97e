package demo

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"

	"github.com/cupti-exporter/cupti-exporter/recording"
)

const catalogTSV = "../../testdata/gh100_pm_sampling_base_metrics.tsv"

// The synthetic generator (make synthetic) still makes a complete two-GPU recording, for
// trying dashboards on more than one GPU without hardware.
func TestSyntheticGenerator(t *testing.T) {
	var buf bytes.Buffer
	if err := Generate(&buf, catalogTSV); err != nil {
		t.Fatal(err)
	}
	r, err := recording.FromBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if !s.Header.Synthetic || !s.Complete || len(s.Devices) != 2 || s.Samples == 0 || s.ActivityRecords == 0 || s.HealthSnapshots != 60 {
		t.Fatalf("summary %+v", s)
	}
	// Health: both GPUs, with the PM series' labels, energy rising with the power drawn.
	var snaps []*snapshot.Snapshot
	r, err = recording.FromBytes(buf.Bytes(), recording.WithSpeed(0), recording.WithHealthSink(func(s *snapshot.Snapshot) { snaps = append(snaps, s) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), func(pmdata.Batch) {}); err != nil {
		t.Fatal(err)
	}
	value := func(s *snapshot.Snapshot, name, gpu string) (float64, []string) {
		for _, f := range s.Families {
			for _, x := range f.Samples {
				if f.Desc.Name == name && x.LabelValues[0] == gpu {
					return x.Value, x.LabelValues
				}
			}
		}
		t.Fatalf("no %s for gpu %s", name, gpu)
		return 0, nil
	}
	for _, d := range s.Devices {
		gpu := fmt.Sprint(d.Index)
		_, l := value(snaps[0], "cupti_gpu_power_watts", gpu)
		if want := []string{gpu, d.UUID, d.Model, d.PCIBusID}; !slices.Equal(l, want) {
			t.Errorf("labels %q, want the PM series' %q", l, want)
		}
		e0, _ := value(snaps[10], "cupti_gpu_energy_joules_total", gpu)
		e1, _ := value(snaps[11], "cupti_gpu_energy_joules_total", gpu)
		p, _ := value(snaps[11], "cupti_gpu_power_watts", gpu)
		if idle, _ := value(snaps[0], "cupti_gpu_power_watts", gpu); p <= idle || math.Abs(e1-e0-p) > 1e-6 {
			t.Errorf("gpu %s: %v J in a second at %v W (idle %v W)", gpu, e1-e0, p, idle)
		}
		if used, _ := value(snaps[10], "cupti_gpu_memory_used_bytes", gpu); used < 10<<30 {
			t.Errorf("gpu %s: %v bytes used during the matmul phase", gpu, used)
		}
	}
	t.Logf("%d bytes with %d health snapshots", buf.Len(), len(snaps))
}

func TestEmbeddedRecording(t *testing.T) {
	r, err := recording.FromBytes(Recording())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if len(Recording()) > 3<<20 {
		t.Errorf("embedded recording is %d bytes, keep it under 3 MiB", len(Recording()))
	}
	// The demo is a real H200 run (scripts/gpu/validate.sh record), not the synthetic one.
	if s.Header.Synthetic || !s.Complete || len(s.Devices) == 0 || len(s.Catalog) == 0 || s.Samples == 0 || s.ActivityRecords == 0 {
		t.Fatalf("summary %+v", s)
	}
	if d := s.Last - s.First; d < 55e9 || d > 65e9 {
		t.Errorf("span %d ns, want about 60 s", d)
	}
	t.Logf("%d bytes, %d batches, %d samples, %d activity records", len(Recording()), s.Batches, s.Samples, s.ActivityRecords)
}

// The node generator makes the shape it is asked for: every GPU, every pod's hello, every
// kernel name launched, and health for every GPU.
func TestGenerateNode(t *testing.T) {
	var buf bytes.Buffer
	spec := NodeSpec{GPUs: 3, Pods: 5, KernelNames: 40, Duration: 10 * time.Second}
	if err := GenerateNode(&buf, catalogTSV, spec); err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{names: map[string]bool{}, pods: map[string]bool{}}
	r, err := recording.FromBytes(buf.Bytes(), recording.WithSpeed(0), recording.WithActivitySink(sink))
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if !s.Header.Synthetic || !s.Complete || len(s.Devices) != 3 || s.HealthSnapshots != 10 {
		t.Fatalf("summary %+v", s)
	}
	if err := r.Run(context.Background(), func(pmdata.Batch) {}); err != nil {
		t.Fatal(err)
	}
	colls := map[string]bool{} // every pod's collective kernel, the 5 pods use 4 names
	for p := range 5 {
		colls[nodeCollectives[p%len(nodeCollectives)]] = true
	}
	if len(sink.pods) != 5 || len(sink.names) != 40+len(colls) || sink.coverage == 0 {
		t.Errorf("%d pods, %d kernel names, %d coverage spans; want 5, 40 + %d collectives and some", len(sink.pods), len(sink.names), sink.coverage, len(colls))
	}
	if _, err := (NodeSpec{GPUs: 0}).withDefaults(); err == nil {
		t.Error("a node of no GPU was accepted")
	}
}

type countingSink struct {
	names, pods map[string]bool
	coverage    int
}

func (c *countingSink) Connect(_ uint64, p record.Process) { c.pods[p.Namespace+"/"+p.Pod] = true }
func (c *countingSink) Add(_ uint64, _ uint64, recs []record.Record) {
	for _, r := range recs {
		if r.Kind == record.KindKernel {
			c.names[r.Name] = true
		}
	}
}
func (c *countingSink) Coverage(_ uint64, spans []record.Interval) { c.coverage += len(spans) }
func (c *countingSink) Disconnect(uint64)                          {}
