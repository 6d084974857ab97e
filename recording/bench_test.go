package recording

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// bigBatch is one 250 ms decode at 10 kHz of 10 metrics.
func bigBatch() pmdata.Batch {
	metrics := make([]string, 10)
	for i := range metrics {
		metrics[i] = "sm__metric_" + string(rune('a'+i)) + ".avg.pct_of_peak_sustained_elapsed"
	}
	b := pmdata.Batch{Metrics: metrics, Samples: make([]pmdata.Sample, 2500)}
	for i := range b.Samples {
		b.Samples[i] = pmdata.Sample{Start: t0 + uint64(i)*1e5, End: t0 + uint64(i+1)*1e5, Values: make([]float64, 10)}
	}
	return b
}

// BenchmarkWriteRead10kHz writes and reads back one second of 10 kHz x 10 metrics per op.
func BenchmarkWriteRead10kHz(b *testing.B) {
	batch := bigBatch()
	b.ReportAllocs()
	for b.Loop() {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, Header{}, t0)
		for range 4 {
			if err := w.WriteBatch(t0, batch); err != nil {
				b.Fatal(err)
			}
		}
		w.Close(t0)
		b.SetBytes(int64(buf.Len()))
		rd, err := NewReader(&buf)
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := rd.Next(); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// The writer takes batches and activity from several goroutines; every frame stays whole.
func TestWriterConcurrentSafe(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if g%2 == 0 {
					w.WriteBatch(t0, pmdata.Batch{Device: g, Metrics: testMetrics, Samples: []pmdata.Sample{{Start: 1, End: 2, Values: []float64{1, 2}}}})
				} else {
					w.WriteActivity(t0, ActivityBatch{Conn: uint64(g), Records: []record.Record{{Kind: record.KindKernel, Name: "k"}}})
				}
				if i%10 == 0 {
					w.Flush()
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(t0); err != nil {
		t.Fatal(err)
	}
	evs, rd, err := readAll(buf.Bytes())
	if err != nil || !rd.Ended() || len(evs) != 201 {
		t.Fatalf("%d events, ended %v, err %v", len(evs), rd.Ended(), err)
	}
}
