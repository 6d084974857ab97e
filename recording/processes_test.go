package recording

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// TestProcessesReplay: NVML process observations come back from a replay with their times
// shifted exactly as the sample times are (the join matches them by time), an unknown share
// stays unknown, and the summary counts them.
func TestProcessesReplay(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Producer: "test", IntervalNS: 1e6}, t0)
	if err != nil {
		t.Fatal(err)
	}
	unknown := math.NaN()
	want := gpuprocs.Observation{GPU: "0", UUID: "GPU-0", Start: time.Unix(0, int64(t0)), End: time.Unix(0, int64(t0+1e9)), Shares: true, Processes: []gpuprocs.Process{
		{PID: 11, SMShare: 0.5, Namespace: "ml", Pod: "train-0", Container: "main"},
		{PID: 12, SMShare: unknown},
		{PID: 13, SMShare: unknown, MPS: gpuprocs.MPSServer}, // version 6
		{PID: 14, SMShare: unknown, MPS: gpuprocs.MPSClient},
	}}
	for _, err := range []error{
		w.WriteDevices(t0, testDevices), w.WriteCatalog(t0, testCatalog),
		w.WriteBatch(t0+1e9, pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: []pmdata.Sample{{Start: t0, End: t0 + 1e6, Values: []float64{1, 2}}}}),
		w.WriteProcesses(t0+1e9, want), w.Close(t0 + 2e9),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var got []gpuprocs.Observation
	var sampleStart uint64
	r, err := FromBytes(buf.Bytes(), WithSpeed(0), WithProcessesSink(func(e gpuprocs.Observation) { got = append(got, e) }))
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Summary().ProcessFrames; n != 1 {
		t.Fatalf("summary: %d process frames, want 1", n)
	}
	if err := r.Run(context.Background(), func(b pmdata.Batch) { sampleStart = b.Samples[0].Start }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d observations, want 1", len(got))
	}
	e := got[0]
	if e.Start.Sub(want.Start) != time.Duration(sampleStart-t0) || e.End.Sub(e.Start) != time.Second {
		t.Errorf("period [%v, %v) shifted by %v, samples by %d", e.Start, e.End, e.Start.Sub(want.Start), sampleStart-t0)
	}
	if e.GPU != "0" || e.UUID != "GPU-0" || !e.Shares || len(e.Processes) != 4 {
		t.Fatalf("observation %+v", e)
	}
	if p := e.Processes[0]; p.PID != 11 || p.SMShare != 0.5 || p.Pod != "train-0" || p.Namespace != "ml" || p.Container != "main" {
		t.Errorf("process 0: %+v", p)
	}
	if p := e.Processes[1]; p.PID != 12 || !math.IsNaN(p.SMShare) || p.MPS != "" {
		t.Errorf("process 1 (unknown share): %+v", p)
	}
	if e.Processes[2].MPS != gpuprocs.MPSServer || e.Processes[3].MPS != gpuprocs.MPSClient {
		t.Errorf("MPS roles %q, %q; want server, client", e.Processes[2].MPS, e.Processes[3].MPS)
	}
}

// TestProcessesRejects: frames no health source writes are corruption, with the reason.
func TestProcessesRejects(t *testing.T) {
	rd := &Reader{version: Version, header: Header{Version: Version}}
	for payload, want := range map[string]string{
		`{"gpu":"0","start_ns":5,"end_ns":5,"processes":[]}`:                                                                    "empty",
		`{"gpu":"0","start_ns":5,"end_ns":6,"processes":[{"pid":1,"sm_share":1.5}]}`:                                            "outside 0..1",
		`{"gpu":"0","start_ns":5,"end_ns":6,"processes":[{"pid":1,"sm_share":-1}]}`:                                             "outside 0..1",
		`{"gpu":"0","start_ns":5,"end_ns":6,"processes":[` + strings.Repeat(`{"pid":1},`, maxObservedProcesses) + `{"pid":2}]}`: "processes in one frame",
		`{"gpu":"0","start_ns":5,"end_ns":6,"processes":[{"pid":1,"mps":"daemon"}]}`:                                            "unknown MPS role",
		`not json`: "invalid",
	} {
		ev := Event{Type: FrameProcesses}
		if err := rd.decode(&ev, []byte(payload)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: %v, want %q", payload, err, want)
		}
	}
	old := &Reader{version: 4, header: Header{Version: 4}}
	ev := Event{Type: FrameProcesses}
	if err := old.decode(&ev, []byte(`{"gpu":"0","start_ns":5,"end_ns":6}`)); err == nil || !strings.Contains(err.Error(), "version-4") {
		t.Errorf("processes frame in a version-4 file: %v", err)
	}
	v5 := &Reader{version: 5, header: Header{Version: 5}}
	if err := v5.decode(&ev, []byte(`{"gpu":"0","start_ns":5,"end_ns":6,"processes":[{"pid":1,"mps":"server"}]}`)); err == nil || !strings.Contains(err.Error(), "version-5") {
		t.Errorf("an MPS role in a version-5 file: %v", err)
	}
	if err := v5.decode(&ev, []byte(`{"gpu":"0","start_ns":5,"end_ns":6,"processes":[{"pid":1,"sm_share":0.5}]}`)); err != nil {
		t.Errorf("a version-5 processes frame: %v", err)
	}
}

// TestRecordedProcessesRoundTrip: what the health source saw of a GPU's processes survives a
// recording (record writes it, replay feeds it to the join): an unknown share stays unknown.
func TestRecordedProcessesRoundTrip(t *testing.T) {
	in := gpuprocs.Observation{GPU: "0", UUID: "GPU-0", Start: time.Unix(10, 5), End: time.Unix(11, 7), Shares: true, MIG: true, Processes: []gpuprocs.Process{
		{PID: 7, SMShare: 0.25, Namespace: "ml", Pod: "p", Container: "c", MPS: gpuprocs.MPSClient}, {PID: 8, SMShare: math.NaN(), MPS: gpuprocs.MPSServer},
	}}
	f := processesFrame(in)
	out := f.Observation()
	if !out.Start.Equal(in.Start) || !out.End.Equal(in.End) || out.GPU != "0" || out.UUID != "GPU-0" || !out.Shares || !out.MIG || len(out.Processes) != 2 {
		t.Fatalf("round trip: %+v", out)
	}
	if out.Processes[1].MPS != gpuprocs.MPSServer {
		t.Errorf("process 1: MPS role %q, want the server", out.Processes[1].MPS)
	}
	if p := out.Processes[0]; p != in.Processes[0] {
		t.Errorf("process 0: %+v, want %+v", p, in.Processes[0])
	}
	if p := out.Processes[1]; p.PID != 8 || !math.IsNaN(p.SMShare) {
		t.Errorf("process 1 (share unknown): %+v", p)
	}
}
