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

var testProcess = record.Process{
	PID: 4242, StartTime: 1_795_000_000_000_000_000, Executable: "/usr/bin/python3",
	Cgroup: "0::/kubepods/pod1234/abcd", CUDAVersion: 13000, CUPTIVersion: 130001,
	DeviceUUIDs: []string{"GPU-00000000-1111-2222-3333-444444444444", ""},
	Pod:         "trainer-0", Namespace: "ml", Container: "main",
}

var testRecords = []record.Record{
	{Kind: record.KindKernel, Device: 0, Stream: 7, Start: 100, End: 250, Name: "_Z4busyPfii"},
	{Kind: record.KindMemcpy, Device: 1, Stream: 13, Start: 300, End: 400, Bytes: 1 << 20, CopyKind: 1, SrcKind: 1, DstKind: 3},
	{Kind: record.KindMemset, Device: 0, Stream: 7, Start: 500, End: 510, Bytes: 4096, MemoryKind: 3},
	{Kind: record.KindKernel, Device: 0, Stream: 7, Start: 600, End: 900, Name: "_Z4busyPfii"},
	{Kind: record.KindKernel, Device: 0, Stream: 8, Start: 0, End: 0},
	{Kind: record.KindMemcpy, Device: 0, Stream: 14, Start: 420, End: 480, Bytes: 8 << 20, CopyKind: 10, SrcKind: 3, DstKind: 3, SrcDevice: 1},
}

func encodeStream(t testing.TB, f func(e *Encoder) error) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := f(NewEncoder(&buf)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	drops := Drops{DropQueueFull: 3, DropCUPTI: 2}
	stream := encodeStream(t, func(e *Encoder) error {
		return errors.Join(e.Hello(testProcess), e.Records(5, testRecords), e.Drops(drops),
			e.Records(6, testRecords[3:4]), e.Goodbye(6, drops))
	})
	_, got := decodeAll(t, stream)
	if len(got) != 5 {
		t.Fatalf("got %d messages, want 5 (strings frames are absorbed)", len(got))
	}
	if got[0].Type != FrameHello || !reflect.DeepEqual(got[0].Process, testProcess) {
		t.Errorf("hello = %+v, want %+v", got[0].Process, testProcess)
	}
	if got[1].Type != FrameRecords || got[1].DropTotal != 5 || !reflect.DeepEqual(got[1].Records, testRecords) {
		t.Errorf("records = %+v drops %d, want %+v drops 5", got[1].Records, got[1].DropTotal, testRecords)
	}
	if got[2].Type != FrameDrops || got[2].Drops != drops || got[2].DropTotal != 5 {
		t.Errorf("drops = %+v total %d", got[2].Drops, got[2].DropTotal)
	}
	if !reflect.DeepEqual(got[3].Records, testRecords[3:4]) {
		t.Errorf("second batch = %+v (name must resolve from the earlier strings frame)", got[3].Records)
	}
	if got[4].Type != FrameGoodbye || got[4].SentRecords != 6 || got[4].Drops != drops {
		t.Errorf("goodbye = %+v", got[4])
	}
}

// frameSizes decodes stream and returns size(m) of each frame of type typ, in order.
func frameSizes(t *testing.T, stream []byte, typ FrameType, size func(*Message) int) []int {
	t.Helper()
	d := NewDecoder(bytes.NewReader(stream))
	var m Message
	var n []int
	for {
		if err := d.ReadInto(&m); err == io.EOF {
			return n
		} else if err != nil {
			t.Fatal(err)
		}
		if m.Type == typ {
			n = append(n, size(&m))
		}
	}
}

func TestEncoderSplitsLargeBatches(t *testing.T) {
	recs := make([]record.Record, MaxRecordsPerFrame+10)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindMemset, Start: uint64(i), End: uint64(i) + 1}
	}
	stream := encodeStream(t, func(e *Encoder) error { return errors.Join(e.Hello(testProcess), e.Records(0, recs)) })
	n := frameSizes(t, stream, FrameRecords, func(m *Message) int { return len(m.Records) })
	if !reflect.DeepEqual(n, []int{MaxRecordsPerFrame, 10}) {
		t.Errorf("batch sizes %v, want [%d 10]", n, MaxRecordsPerFrame)
	}
}

// frame builds one raw frame; hello is a valid hello frame to prefix others with.
func frame(t FrameType, p []byte) []byte { return AppendFrame(nil, t, p) }

// decodeAll decodes a whole well-formed stream; it fails the test on any error.
func decodeAll(t testing.TB, stream []byte) (*Decoder, []*Message) {
	t.Helper()
	d := NewDecoder(bytes.NewReader(stream))
	var got []*Message
	for {
		m, err := d.Next()
		if err == io.EOF {
			return d, got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
}

func hello() []byte {
	var b bytes.Buffer
	if err := NewEncoder(&b).Hello(record.Process{PID: 1}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func recordsPayload(size, n int, mutate func(rec []byte)) []byte {
	p := make([]byte, recordsHeader+n*size)
	le.PutUint32(p[8:], uint32(n))
	le.PutUint16(p[12:], uint16(size))
	for i := 0; i < n; i++ {
		rec := p[recordsHeader+i*size:]
		rec[0] = byte(record.KindKernel)
		if mutate != nil {
			mutate(rec)
		}
	}
	return p
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecoderRejects(t *testing.T) {
	badMagic := frame(FrameHello, nil)
	badMagic[0] = 'X'
	badVersion := frame(FrameDrops, nil)
	badVersion[4] = Version + 1
	huge := frame(FrameRecords, nil)
	le.PutUint32(huge[8:], MaxPayload+1)
	flags := frame(FrameDrops, make([]byte, 4))
	flags[6] = 1
	unknownType := frame(FrameDrops, make([]byte, 4))
	unknownType[5] = 9
	longStr := le.AppendUint32(nil, 1)
	longStr = le.AppendUint16(le.AppendUint32(longStr, 1), MaxString+1)
	longStr = append(longStr, make([]byte, MaxString+1)...)
	strEntry := func(id uint32, s string) []byte {
		b := le.AppendUint32(le.AppendUint32(nil, 1), id)
		return append(le.AppendUint16(b, uint16(len(s))), s...)
	}
	manyDevices := make([]byte, 20+5*2)
	manyDevices = le.AppendUint16(manyDevices, MaxDevices+1)

	for _, tc := range []struct {
		name   string
		stream []byte
		target error
		msg    string
	}{
		{"bad magic", badMagic, ErrBadMagic, "magic"},
		{"version 4", cat(hello(), badVersion), ErrUnsupportedVersion, "version 4"},
		{"payload over limit", cat(hello(), huge), ErrTooLarge, "payload 1048577 bytes"},
		{"non-zero flags", cat(hello(), flags), ErrMalformed, "flags"},
		{"unknown frame type", cat(hello(), unknownType), ErrMalformed, "unknown type 9"},
		{"records before hello", frame(FrameRecords, recordsPayload(48, 1, nil)), ErrMalformed, "before hello"},
		{"second hello", cat(hello(), hello()), ErrMalformed, "second hello"},
		{"frame after goodbye", cat(hello(), frame(FrameGoodbye, make([]byte, 12)), frame(FrameDrops, make([]byte, 4))), ErrMalformed, "after goodbye"},
		{"truncated header", cat(hello(), frame(FrameDrops, nil)[:5]), io.ErrUnexpectedEOF, "header"},
		{"truncated payload", cat(hello(), frame(FrameDrops, make([]byte, 12))[:20]), io.ErrUnexpectedEOF, "payload"},
		{"hello too short", frame(FrameHello, make([]byte, 10)), ErrMalformed, "start time"},
		{"hello too many devices", frame(FrameHello, manyDevices), ErrTooLarge, "device count 65"},
		{"string over MaxString", cat(hello(), frame(FrameStrings, longStr)), ErrTooLarge, "4097 bytes"},
		{"string id 0", cat(hello(), frame(FrameStrings, strEntry(0, "k"))), ErrMalformed, "id 0 outside"},
		{"string id over max", cat(hello(), frame(FrameStrings, strEntry(MaxNameID+1, "k"))), ErrMalformed, "outside"},
		{"string redefined", cat(hello(), frame(FrameStrings, strEntry(3, "a")), frame(FrameStrings, strEntry(3, "b"))), ErrMalformed, "defined twice"},
		{"strings trailing bytes", cat(hello(), frame(FrameStrings, append(strEntry(3, "a"), 0))), ErrMalformed, "1 bytes after 1 entries"},
		{"records header short", cat(hello(), frame(FrameRecords, make([]byte, 15))), ErrMalformed, "header: 15 bytes"},
		{"record size small", cat(hello(), frame(FrameRecords, recordsPayload(40, 1, nil))), ErrMalformed, "record size 40"},
		{"record count mismatch", cat(hello(), frame(FrameRecords, recordsPayload(48, 2, nil)[:16+48])), ErrMalformed, "do not fill"},
		{"record count huge", cat(hello(), frame(FrameRecords, func() []byte { p := recordsPayload(48, 1, nil); le.PutUint32(p[8:], 1<<31); return p }())), ErrMalformed, "do not fill"},
		{"record unknown kind", cat(hello(), frame(FrameRecords, recordsPayload(48, 1, func(r []byte) { r[0] = 9 }))), ErrMalformed, "record 0: unknown kind 9"},
		{"record undefined name", cat(hello(), frame(FrameRecords, recordsPayload(48, 1, func(r []byte) { le.PutUint32(r[40:], 7) }))), ErrMalformed, "name id 7 not defined"},
		{"record duration overflow", cat(hello(), frame(FrameRecords, recordsPayload(48, 1, func(r []byte) {
			le.PutUint64(r[16:], 1<<63)
			le.PutUint64(r[24:], 1<<63)
		}))), ErrMalformed, "overflows"},
		{"drops too many reasons", cat(hello(), frame(FrameDrops, []byte{MaxDropReasons + 1, 0, 0, 0})), ErrTooLarge, "drop reasons 65"},
		{"drops reserved", cat(hello(), frame(FrameDrops, []byte{0, 0, 1, 0})), ErrMalformed, "reserved"},
		{"drops short", cat(hello(), frame(FrameDrops, []byte{2, 0, 0, 0, 1})), ErrMalformed, "drop counter"},
		{"goodbye short", cat(hello(), frame(FrameGoodbye, make([]byte, 4))), ErrMalformed, "records total"},
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

func TestDecoderIgnoresAppendedFields(t *testing.T) {
	// A larger record size and trailing hello/drops bytes are compatible additions.
	h := hello()
	h = append(h[:HeaderSize], append(h[HeaderSize:], 1, 2, 3)...)
	le.PutUint32(h[8:], uint32(len(h)-HeaderSize))
	recs := recordsPayload(56, 2, func(r []byte) { le.PutUint64(r[16:], 10); le.PutUint64(r[24:], 5); r[50] = 0xff })
	drops := le.AppendUint16(nil, 8)
	drops = le.AppendUint16(drops, 0)
	for i := range 8 {
		drops = le.AppendUint64(drops, uint64(i+1))
	}
	d := NewDecoder(bytes.NewReader(cat(h, frame(FrameRecords, recs), frame(FrameDrops, drops))))
	for _, want := range []FrameType{FrameHello, FrameRecords, FrameDrops} {
		m, err := d.Next()
		if err != nil {
			t.Fatalf("%s: %v", want, err)
		}
		if m.Type != want {
			t.Fatalf("type %s, want %s", m.Type, want)
		}
		if want == FrameRecords && (len(m.Records) != 2 || m.Records[1].End != 15) {
			t.Errorf("records %+v", m.Records)
		}
		if want == FrameDrops && (m.Drops != Drops{1, 2, 3, 4, 5, 6}) {
			t.Errorf("drops %v, want the first %d reasons", m.Drops, NumDropReasons)
		}
	}
}

func TestReadIntoDoesNotAllocate(t *testing.T) {
	batch := encodeStream(t, func(e *Encoder) error { return e.Records(0, testRecords) })
	rest := encodeStream(t, func(e *Encoder) error { // a second batch reusing the names: no strings frame
		e.names["_Z4busyPfii"] = 1
		return e.Records(0, testRecords)
	})
	const n = 200
	stream := cat(hello(), batch, bytes.Repeat(rest, n))
	d := NewDecoder(bytes.NewReader(stream))
	var m Message
	for range 2 {
		if err := d.ReadInto(&m); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(n-1, func() {
		if err := d.ReadInto(&m); err != nil || len(m.Records) != len(testRecords) {
			t.Fatal(err, len(m.Records))
		}
	})
	if allocs != 0 {
		t.Errorf("ReadInto allocates %.1f times per batch, want 0", allocs)
	}
	if m.Records[0].Name != "_Z4busyPfii" {
		t.Errorf("name %q", m.Records[0].Name)
	}
}

// TestSourceDevice: offset 44 is the source device of PtoP copies only; in other records
// it is reserved and ignored (older senders leave it 0, and it must not leak into SrcDevice).
func TestSourceDevice(t *testing.T) {
	for _, c := range []struct {
		kind record.Kind
		copy byte
		want uint32
	}{
		{record.KindMemcpy, 10, 3},
		{record.KindMemcpy, 8, 0},
		{record.KindKernel, 10, 0},
	} {
		p := recordsPayload(RecordSize, 1, func(rec []byte) {
			rec[0], rec[1] = byte(c.kind), c.copy
			le.PutUint32(rec[8:], 1)
			le.PutUint32(rec[44:], 3)
		})
		d := NewDecoder(bytes.NewReader(cat(hello(), frame(FrameRecords, p))))
		var m Message
		if err := d.ReadInto(&m); err != nil {
			t.Fatal(err)
		}
		if err := d.ReadInto(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.Records[0]; got.SrcDevice != c.want || got.Device != 1 {
			t.Errorf("kind %d copy kind %d: device %d src device %d, want 1 and %d", c.kind, c.copy, got.Device, got.SrcDevice, c.want)
		}
	}
}
