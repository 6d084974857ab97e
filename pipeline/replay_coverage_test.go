package pipeline

import (
	"bytes"
	"context"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// TestReplayCoverage: coverage spans of a recording reach the activity aggregator
// through the replay's sink (cupti_activity_traced_seconds_total).
func TestReplayCoverage(t *testing.T) {
	agg := activity.NewAggregator()
	replayFrames(t, agg, func(w *recording.Writer, t0 uint64) []error {
		return []error{
			w.WriteDevices(t0, []pmdata.Device{{Index: 0, UUID: "GPU-0"}}),
			w.WriteHello(t0, recording.ProcessEvent{Conn: 1, Process: &record.Process{PID: 7, DeviceUUIDs: []string{"GPU-0"}}}),
			w.WriteCoverage(t0+1, recording.CoverageBatch{Conn: 1, Spans: []record.Interval{
				{Start: t0, End: t0 + 2e9}, {Start: t0 + 2e9, End: t0 + 2.5e9, Lossy: true}}}),
			w.Close(t0 + 3e9),
		}
	})
	got := map[string]float64{}
	for _, f := range agg.Snapshot().Families {
		if f.Desc.Name == "cupti_activity_traced_seconds_total" {
			for _, s := range f.Samples {
				got[s.LabelValues[0]] = s.Value
			}
		}
	}
	if got["complete"] != 2 || got["lossy"] != 0.5 {
		t.Errorf("traced seconds %v, want complete 2 and lossy 0.5", got)
	}
}

// replayFrames writes a recording (write's frames, from t0 on) and replays it at once into agg
// through the replay's activity sink.
func replayFrames(t *testing.T, agg *activity.Aggregator, write func(w *recording.Writer, t0 uint64) []error) {
	t.Helper()
	const t0 = uint64(1_795_000_000_000_000_000)
	var buf bytes.Buffer
	w, err := recording.NewWriter(&buf, recording.Header{Producer: "test"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range write(w, t0) {
		if err != nil {
			t.Fatal(err)
		}
	}
	r, err := recording.FromBytes(buf.Bytes(), recording.WithSpeed(0), recording.WithActivitySink(newActivitySink(agg)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), func(pmdata.Batch) {}); err != nil {
		t.Fatal(err)
	}
}
