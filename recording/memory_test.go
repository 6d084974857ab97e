package recording

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// TestReplayMemoryBounded: replaying a 40 MB recording streams it; the heap in use while
// replaying (sampled at every batch and activity frame) stays far below the file's size,
// as it does for a file 8 times smaller. The issue saw a 50 MB recording reach 1.07 GB.
func TestReplayMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 40 MB recording")
	}
	small := peakReplayHeap(t, 20)
	large := peakReplayHeap(t, 160)
	t.Logf("peak heap growth while replaying: %d KiB (5 MB file), %d KiB (40 MB file)", small>>10, large>>10)
	if large > 16<<20 || large > 2*small+4<<20 {
		t.Errorf("replaying a 40 MB file grew the heap by %d MiB (5 MB file: %d MiB): not streamed", large>>20, small>>20)
	}
}

// peakReplayHeap writes a recording of n big batches (250 KB each) with an activity frame
// of 1,000 records after each, replays it as fast as possible and returns the largest heap
// growth seen over the heap before.
func peakReplayHeap(t *testing.T, n int) uint64 {
	path := filepath.Join(t.TempDir(), "big.cuptirec")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(f, Header{Producer: "test"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteDevices(t0, testDevices); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteHello(t0, ProcessEvent{Conn: 1, Process: &record.Process{PID: 1}}); err != nil {
		t.Fatal(err)
	}
	b := bigBatch()
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Start: t0 + uint64(i), End: t0 + uint64(i) + 1, Name: "_Z4gemmv"}
	}
	for i := range n {
		ts := t0 + uint64(i)*250e6
		if err := w.WriteBatch(ts, b); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteActivity(ts, ActivityBatch{Conn: 1, Records: recs}); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteCoverage(ts, CoverageBatch{Conn: 1, Spans: []record.Interval{{Start: ts + 1, End: ts + 2}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(t0 + uint64(n)*250e6); err != nil {
		t.Fatal(err)
	}
	b, recs = pmdata.Batch{}, nil

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, uint64(0)
	sample := func() {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > base && ms.HeapInuse-base > peak {
			peak = ms.HeapInuse - base
		}
	}
	sink := &memSink{sample: sample}
	r, err := OpenFile(path, WithSpeed(0), WithActivitySink(sink))
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	if err := r.Run(context.Background(), func(pmdata.Batch) { batches++; sample() }); err != nil {
		t.Fatal(err)
	}
	if batches != n || sink.records != 1000*n || sink.spans != n {
		t.Fatalf("replayed %d batches %d records %d spans, want %d %d %d", batches, sink.records, sink.spans, n, 1000*n, n)
	}
	return peak
}

type memSink struct {
	sample         func()
	records, spans int
}

func (s *memSink) Connect(uint64, record.Process) {}
func (s *memSink) Add(_ uint64, _ uint64, r []record.Record) {
	s.records += len(r)
	s.sample()
}
func (s *memSink) Coverage(_ uint64, spans []record.Interval) { s.spans += len(spans) }
func (s *memSink) Disconnect(uint64)                          {}
