//go:build jointap

package pipeline

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// TestJoinTapRecordsAndForwards: with CUPTI_EXPORTER_JOINTAP set, every input of the join is
// written to the recording in the order it came (hello at the connection, records, coverage,
// NVML's processes, the PM batch, goodbye) and still reaches the join, which attributes the
// batch's bytes to the traced pod. (`go test -tags jointap ./pipeline`, run by CI.)
func TestJoinTapRecordsAndForwards(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tap.rec")
	t.Setenv("CUPTI_EXPORTER_JOINTAP", path)
	a, devices, catalog := pcieJoin(t)
	feed := tapJoin(a, devices, catalog, slog.New(slog.DiscardHandler))
	if feed.activity == activity.Listener(a) {
		t.Fatal("the tap is off although CUPTI_EXPORTER_JOINTAP is set")
	}
	t0 := time.Now() // the join counts a process present from its connection on
	ns := uint64(t0.UnixNano())
	p := &record.Process{PID: 7, DeviceUUIDs: []string{"GPU-1"}}
	feed.activity.ProcessConnected(p, activity.ProcessInfo{Namespace: "ns", Pod: "pod", GPUs: []string{"0"}, UUIDs: []string{"GPU-1"}})
	feed.activity.Records(p, []record.Record{{Kind: record.KindKernel, Name: "k", Start: ns, End: ns + 100e6}})
	feed.activity.Coverage(p, []record.Interval{{Start: ns, End: ns + 100e6}})
	feed.processes.ObserveProcesses(gpuprocs.Observation{GPU: "0", UUID: "GPU-1", Start: t0, End: t0.Add(time.Second), Shares: true,
		Processes: []gpuprocs.Process{{PID: 7, SMShare: 1}}})
	feed.batches.Add(pcieBatch(t0))
	a.Flush()
	var podBytes float64
	for _, fam := range a.Snapshot().Families {
		if fam.Desc.Name != "cupti_pod_pcie_bytes_total" {
			continue
		}
		for _, s := range fam.Samples {
			for i, n := range fam.Desc.LabelNames {
				if n == "pod" && s.LabelValues[i] == "pod" {
					podBytes += s.Value
				}
			}
		}
	}
	if podBytes != 100_000 {
		t.Errorf("the join gave the traced pod %v bytes of 100000: the tap did not hand the inputs on", podBytes)
	}
	feed.activity.ProcessDisconnected(p)

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := recording.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	var got []recording.FrameType
	samples := 0
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading the tap: %v (frames so far %v)", err, got)
		}
		got = append(got, ev.Type)
		if ev.Type == recording.FrameBatch {
			samples += len(ev.Batch.Samples)
		}
	}
	want := []recording.FrameType{recording.FrameDevices, recording.FrameCatalog, recording.FrameHello, recording.FrameActivity,
		recording.FrameCoverage, recording.FrameProcesses, recording.FrameBatch, recording.FrameGoodbye}
	if !slices.Equal(got, want) || samples != 100 {
		t.Errorf("tap frames %v with %d samples, want %v with 100", got, samples, want)
	}

}
