package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// FuzzDecoder feeds arbitrary bytes to the decoder: it must return an error or
// io.EOF, never panic, and what it accepts must re-encode to an equal stream.
// Seeds are in testdata/fuzz/FuzzDecoder (written by TestWriteFuzzSeeds).
func FuzzDecoder(f *testing.F) {
	for _, s := range seedStreams(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(bytes.NewReader(data))
		var m Message
		var recs int
		for {
			err := d.ReadInto(&m)
			if err == io.EOF {
				return
			}
			if err != nil {
				if !IsMalformed(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error neither malformed nor truncation: %v", err)
				}
				return
			}
			recs += len(m.Records)
			if recs > len(data) {
				t.Fatalf("%d records from %d bytes", recs, len(data))
			}
			var prev uint64
			for _, s := range m.Coverage {
				if s.End <= s.Start || s.Start < prev {
					t.Fatalf("accepted invalid span %+v after %d", s, prev)
				}
				prev = s.End
			}
			for _, r := range m.Records {
				if r.End < r.Start || r.Kind < record.KindKernel || r.Kind > record.KindMemset {
					t.Fatalf("accepted invalid record %+v", r)
				}
			}
		}
	})
}

func seedStreams(t testing.TB) [][]byte {
	full := encodeStream(t, func(e *Encoder) error {
		return errors.Join(e.Hello(testProcess), e.Records(5, testRecords), e.Coverage(testSpans[:2]),
			e.Drops(Drops{1, 2, 3, 0, 4, 5}), e.Coverage(testSpans[2:]), e.Goodbye(5, Drops{1}))
	})
	return [][]byte{
		full,
		hello(),
		cat(hello(), frame(FrameRecords, recordsPayload(56, 2, nil))),
		cat(hello(), frame(FrameStrings, []byte{1, 0, 0, 0, 9, 0, 0, 0, 1, 0, 'k'})),
		full[:len(full)-7],
		cat(hello(), frame(FrameCoverage, coveragePayload([3]uint64{1, 10, 1}, [3]uint64{10, 12, 0}))),
		cat(hello1(), frame(FrameRecords, recordsPayload(48, 1, nil))),
		cat(hello(), frame(FrameLaunch, launchPayload(1_800_000_000_000_000_000, LaunchRuntime, 211))),
	}
}
