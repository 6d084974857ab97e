package demo

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// aggregatorSink replays a recording's activity into an Aggregator, as the replay command does.
type aggregatorSink struct {
	a     *activity.Aggregator
	procs map[uint64]*record.Process
}

func (s *aggregatorSink) Connect(conn uint64, p record.Process) {
	s.procs[conn] = &p
	s.a.Connect(&p)
}
func (s *aggregatorSink) Add(conn uint64, _ uint64, recs []record.Record) {
	s.a.Add(s.procs[conn], recs)
}
func (s *aggregatorSink) Coverage(conn uint64, spans []record.Interval) {
	s.a.Coverage(s.procs[conn], spans)
}
func (s *aggregatorSink) Disconnect(conn uint64) { s.a.Disconnect(s.procs[conn]) }

// The training generator makes ranks that wait as a synchronous job's do: in the job with a
// rank 30 % slower, the others wait inside the all-reduce about 20 points of their time more
// than it does; in the balanced job the ranks' shares agree. Every state of the time split
// is exercised, and the states add up to the traced time.
func TestGenerateTraining(t *testing.T) {
	var buf bytes.Buffer
	spec := TrainingNode
	spec.Duration = 20 * time.Second
	if err := GenerateTraining(&buf, catalogTSV, spec); err != nil {
		t.Fatal(err)
	}
	sink := &aggregatorSink{a: activity.NewAggregator(), procs: map[uint64]*record.Process{}}
	r, err := recording.FromBytes(buf.Bytes(), recording.WithSpeed(0), recording.WithActivitySink(sink))
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Summary(); !s.Header.Synthetic || !s.Complete || len(s.Devices) != 4 || s.HealthSnapshots != 20 {
		t.Fatalf("summary %+v", s)
	}
	if err := r.Run(context.Background(), func(pmdata.Batch) {}); err != nil {
		t.Fatal(err)
	}
	split := map[string]map[string]float64{} // pod -> state -> seconds
	for _, f := range sink.a.Snapshot().Families {
		if f.Desc.Name != "cupti_pod_time_seconds_total" {
			continue
		}
		for _, s := range f.Samples {
			pod := s.LabelValues[3]
			if split[pod] == nil {
				split[pod] = map[string]float64{}
			}
			split[pod][s.LabelValues[5]] += s.Value
		}
	}
	share := map[string]float64{}
	for pod, st := range split {
		total := 0.0
		for name, v := range st {
			total += v
			if v <= 0 {
				t.Errorf("%s: no %s time", pod, name)
			}
		}
		// From the first span with a record (2 s) to the goodbye (19 s).
		if total < 16.5 || total > 18.01 {
			t.Errorf("%s: the states add up to %.3f s, want about 17 s of traced time", pod, total)
		}
		share[pod] = st["communication"] / total
	}
	t.Logf("communication share: %v", share)
	if len(share) != 4 {
		t.Fatalf("split of %d pods, want 4: %v", len(share), split)
	}
	if gap := share["pretrain-0"] - share["pretrain-1"]; gap < 0.15 || gap > 0.3 {
		t.Errorf("pretrain: rank 0 waits %.3f of its time more than the slow rank 1, want about 0.2", gap)
	}
	if gap := math.Abs(share["finetune-0"] - share["finetune-1"]); gap > 0.01 {
		t.Errorf("finetune (balanced): the ranks' shares differ by %.3f", gap)
	}
	if err := GenerateTraining(&bytes.Buffer{}, catalogTSV, TrainingSpec{Jobs: []TrainingJob{{Name: "x", Ranks: 2, SlowRank: 2}}}); err == nil {
		t.Error("a slow rank outside the job was accepted")
	}
}
