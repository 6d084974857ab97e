package wire

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

var testSpans = []record.Interval{
	{Start: 1_000, End: 2_000},
	{Start: 2_000, End: 2_500, Lossy: true}, // may start where the previous one ended
	{Start: 9_000, End: 9_001},
}

func TestCoverageRoundTrip(t *testing.T) {
	stream := encodeStream(t, func(e *Encoder) error {
		return errors.Join(e.Hello(testProcess), e.Coverage(testSpans[:2]), e.Records(0, testRecords[:1]),
			e.Coverage(testSpans[2:]))
	})
	if stream[4] != Version {
		t.Fatalf("encoder writes version %d, want %d", stream[4], Version)
	}
	d := NewDecoder(bytes.NewReader(stream))
	var m Message
	var spans []record.Interval
	for {
		err := d.ReadInto(&m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == FrameCoverage {
			spans = append(spans, m.Coverage...)
		} else if len(m.Coverage) != 0 {
			t.Errorf("%s message carries %d spans", m.Type, len(m.Coverage))
		}
	}
	if !reflect.DeepEqual(spans, testSpans) {
		t.Errorf("spans %+v, want %+v", spans, testSpans)
	}
	if d.Version() != Version {
		t.Errorf("Version() = %d, want %d", d.Version(), Version)
	}
}

func TestCoverageSplitsLargeBatches(t *testing.T) {
	spans := make([]record.Interval, MaxSpansPerFrame+3)
	for i := range spans {
		spans[i] = record.Interval{Start: uint64(2*i + 1), End: uint64(2*i + 2)}
	}
	stream := encodeStream(t, func(e *Encoder) error { return errors.Join(e.Hello(testProcess), e.Coverage(spans)) })
	n := frameSizes(t, stream, FrameCoverage, func(m *Message) int { return len(m.Coverage) })
	if !reflect.DeepEqual(n, []int{MaxSpansPerFrame, 3}) {
		t.Errorf("frame sizes %v, want [%d 3]", n, MaxSpansPerFrame)
	}
}

// TestVersion1Sender: an old library's stream (version 1, no coverage) still decodes;
// it can never carry coverage, so its process counts as untraced.
func TestVersion1Sender(t *testing.T) {
	var buf bytes.Buffer
	e, err := NewEncoderVersion(&buf, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(e.Hello(testProcess), e.Records(1, testRecords), e.Goodbye(6, Drops{1})); err != nil {
		t.Fatal(err)
	}
	if err := e.Coverage(testSpans); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("Coverage on a version-1 encoder: %v, want ErrUnsupportedVersion", err)
	}
	if _, err := NewEncoderVersion(&buf, Version+1); !errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("NewEncoderVersion(%d): %v", Version+1, err)
	}
	d, msgs := decodeAll(t, buf.Bytes())
	var types []FrameType
	for _, m := range msgs {
		types = append(types, m.Type)
	}
	if !reflect.DeepEqual(types, []FrameType{FrameHello, FrameRecords, FrameGoodbye}) || d.Version() != 1 {
		t.Errorf("types %v version %d", types, d.Version())
	}
}

func coveragePayload(spans ...[3]uint64) []byte {
	b := le.AppendUint32(nil, uint32(len(spans)))
	b = le.AppendUint32(b, 0)
	for _, s := range spans {
		b = le.AppendUint64(le.AppendUint64(b, s[0]), s[1])
		b = le.AppendUint32(le.AppendUint32(b, uint32(s[2])), 0)
	}
	return b
}

func hello1() []byte { return helloVersion(1) }

// helloVersion is a hello frame of wire version v.
func helloVersion(v int) []byte {
	var b bytes.Buffer
	e, _ := NewEncoderVersion(&b, v)
	if err := e.Hello(record.Process{PID: 1}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestCoverageRejects(t *testing.T) {
	cov := func(spans ...[3]uint64) []byte { return frame(FrameCoverage, coveragePayload(spans...)) }
	reserved := coveragePayload([3]uint64{1, 2, 0})
	reserved[4] = 1
	spanReserved := coveragePayload([3]uint64{1, 2, 0})
	spanReserved[8+20] = 1
	huge := le.AppendUint32(nil, MaxSpansPerFrame+1)
	huge = le.AppendUint32(huge, 0)
	for _, tc := range []struct {
		name   string
		stream []byte
		target error
		msg    string
	}{
		{"coverage in version 1", cat(hello1(), AppendFrameVersion(nil, 1, FrameCoverage, coveragePayload([3]uint64{1, 2, 0}))), ErrMalformed, "unknown type 6 in version 1"},
		{"versions mixed", cat(hello1(), cov([3]uint64{1, 2, 0})), ErrMalformed, "version 3 on a version-1 connection"},
		{"coverage before hello", cov([3]uint64{1, 2, 0}), ErrMalformed, "before hello"},
		{"header short", cat(hello(), frame(FrameCoverage, make([]byte, 7))), ErrMalformed, "header: 7 bytes"},
		{"reserved", cat(hello(), frame(FrameCoverage, reserved)), ErrMalformed, "reserved field 0x1"},
		{"span reserved", cat(hello(), frame(FrameCoverage, spanReserved)), ErrMalformed, "span 0: reserved"},
		{"count over limit", cat(hello(), frame(FrameCoverage, huge)), ErrTooLarge, "span count 43691"},
		{"count mismatch", cat(hello(), frame(FrameCoverage, coveragePayload([3]uint64{1, 2, 0})[:8+23])), ErrMalformed, "do not fill"},
		{"empty span", cat(hello(), cov([3]uint64{5, 5, 0})), ErrMalformed, "span 0: end 5 <= start 5"},
		{"reversed span", cat(hello(), cov([3]uint64{1, 2, 0}, [3]uint64{9, 3, 0})), ErrMalformed, "span 1: end 3 <= start 9"},
		{"overlap in a frame", cat(hello(), cov([3]uint64{1, 10, 0}, [3]uint64{5, 20, 0})), ErrMalformed, "span 1: start 5 before the end 10"},
		{"overlap across frames", cat(hello(), cov([3]uint64{1, 10, 0}), cov([3]uint64{9, 20, 1})), ErrMalformed, "coverage frame 3: span 0: start 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(bytes.NewReader(tc.stream))
			var err error
			for err == nil {
				_, err = d.Next()
			}
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.target, tc.msg)
			}
		})
	}
}
