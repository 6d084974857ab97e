package wire

import (
	"bytes"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// The records of whole frames are counted; a cut frame, garbage or a count larger than
// the payload holds are not.
func TestCountRecords(t *testing.T) {
	var b bytes.Buffer
	enc := NewEncoder(&b)
	if err := enc.Hello(record.Process{PID: 1}); err != nil {
		t.Fatal(err)
	}
	recs := make([]record.Record, 100)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Start: 1, End: 2, Name: "k"}
	}
	for range 3 {
		if err := enc.Records(0, recs); err != nil {
			t.Fatal(err)
		}
	}
	all := b.Bytes()
	if n := CountRecords(all); n != 300 {
		t.Errorf("%d records, want 300", n)
	}
	if n := CountRecords(all[:len(all)-1]); n != 200 {
		t.Errorf("%d records with the last frame cut, want 200", n)
	}
	if n := CountRecords(append([]byte("garbage!garbage!"), all...)); n != 0 {
		t.Errorf("%d records after garbage, want 0", n)
	}
	lie := AppendFrame(nil, FrameRecords, append(make([]byte, 8), 0xff, 0xff, 0xff, 0x7f, RecordSize, 0, 0, 0))
	if n := CountRecords(lie); n != 0 {
		t.Errorf("%d records from a frame claiming 2^31 with no body, want 0", n)
	}
}
