package wire

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// BenchmarkDecodeRecords decodes full 21,845-record frames with ReadInto;
// records/s is the figure to compare with the 2M records/s pipeline target.
func BenchmarkDecodeRecords(b *testing.B) {
	recs := make([]record.Record, MaxRecordsPerFrame)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Stream: uint32(i % 8), Start: uint64(i) * 1000, End: uint64(i)*1000 + 700,
			Name: fmt.Sprintf("kernel_%d", i%50)}
	}
	var one bytes.Buffer
	enc := NewEncoder(&one)
	if err := enc.Records(0, recs); err != nil { // carries the strings frame
		b.Fatal(err)
	}
	first := bytes.Clone(one.Bytes())
	one.Reset()
	if err := enc.Records(0, recs); err != nil {
		b.Fatal(err)
	}
	batch := one.Bytes()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	d := NewDecoder(&loopReader{head: cat(hello(), first), loop: batch})
	var m Message
	var n int
	for b.Loop() {
		if err := d.ReadInto(&m); err != nil {
			b.Fatal(err)
		}
		n += len(m.Records)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// loopReader yields head once, then loop forever.
type loopReader struct {
	head, loop []byte
	off        int
}

func (r *loopReader) Read(p []byte) (int, error) {
	if len(r.head) > 0 {
		n := copy(p, r.head)
		r.head = r.head[n:]
		return n, nil
	}
	n := copy(p, r.loop[r.off:])
	r.off = (r.off + n) % len(r.loop)
	return n, nil
}
