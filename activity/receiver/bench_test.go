package receiver

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// BenchmarkReceive measures the receiving pipeline on one goroutine, from wire bytes to
// aggregated histograms: decoding full record frames (80 distinct kernel names over two
// GPUs, one record in ten a memcpy) and Aggregator.Add. records/s is the figure to compare
// with the 2M records/s target.
func BenchmarkReceive(b *testing.B) {
	var stream bytes.Buffer
	enc := wire.NewEncoder(&stream)
	p := record.Process{PID: 1, DeviceUUIDs: []string{"GPU-a", "GPU-b"}, Pod: "p", Namespace: "n"}
	if err := enc.Hello(p); err != nil {
		b.Fatal(err)
	}
	recs := make([]record.Record, wire.MaxRecordsPerFrame)
	for i := range recs {
		r := record.Record{Kind: record.KindKernel, Device: uint32(i % 2), Start: uint64(i) * 1000,
			End: uint64(i)*1000 + 500 + uint64(i%977)*37, Name: fmt.Sprintf("_ZN2at6native%dkernel_%dIfEEvPT_", 7+len(fmt.Sprint(i%80)), i%80)}
		if i%10 == 0 {
			r = record.Record{Kind: record.KindMemcpy, Device: uint32(i % 2), CopyKind: 1, SrcKind: 2, DstKind: 3,
				Bytes: 1 << 20, Start: r.Start, End: r.End}
		}
		recs[i] = r
	}
	const frames = 10
	for range frames {
		if err := enc.Records(0, recs); err != nil {
			b.Fatal(err)
		}
	}
	data := stream.Bytes()
	srv := &Server{agg: activity.NewAggregator(), log: slog.New(slog.DiscardHandler)}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	r := bytes.NewReader(data)
	for b.Loop() {
		r.Reset(data)
		srv.decode(r, nil)
	}
	b.ReportMetric(float64(b.N*frames*len(recs))/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}
