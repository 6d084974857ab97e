package wire

import (
	"fmt"
	"io"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// Encoder writes frames to one connection. It assigns string ids to kernel
// names and sends each name once, before the first record that uses it.
type Encoder struct {
	w       io.Writer
	version uint8
	buf     []byte
	names   map[string]uint32
	bytes   int // string-table bytes sent
}

// NewEncoder returns an Encoder writing to w. The caller sends Hello first.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{w: w, version: Version, names: make(map[string]uint32)}
}

// NewEncoderVersion returns an Encoder writing frames of wire version v (1 to 3),
// as an older sender would; Coverage fails on a version-1 encoder.
func NewEncoderVersion(w io.Writer, v int) (*Encoder, error) {
	if v < MinVersion || v > Version {
		return nil, fmt.Errorf("encoder: version %d, want %d..%d: %w", v, MinVersion, Version, ErrUnsupportedVersion)
	}
	e := NewEncoder(w)
	e.version = uint8(v)
	return e, nil
}

// AppendFrame appends a frame header of the current Version for payload, then
// payload, to dst.
func AppendFrame(dst []byte, t FrameType, payload []byte) []byte {
	return AppendFrameVersion(dst, Version, t, payload)
}

// AppendFrameVersion is AppendFrame with the header's wire version v.
func AppendFrameVersion(dst []byte, v uint8, t FrameType, payload []byte) []byte {
	dst = le.AppendUint32(dst, Magic)
	dst = append(dst, v, byte(t), 0, 0)
	dst = le.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

func (e *Encoder) flush(t FrameType, payload []byte) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("encoding %s frame: payload %d bytes > %d: %w", t, len(payload), MaxPayload, ErrTooLarge)
	}
	e.buf = AppendFrameVersion(e.buf[:0], e.version, t, payload)
	if _, err := e.w.Write(e.buf); err != nil {
		return fmt.Errorf("writing %s frame: %w", t, err)
	}
	return nil
}

func appendStr(dst []byte, s, what string) ([]byte, error) {
	if len(s) > MaxString {
		return dst, fmt.Errorf("%s: %d bytes > %d: %w", what, len(s), MaxString, ErrTooLarge)
	}
	dst = le.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...), nil
}

// Hello writes the hello frame for p.
func (e *Encoder) Hello(p record.Process) error {
	if len(p.DeviceUUIDs) > MaxDevices {
		return fmt.Errorf("encoding hello: %d devices > %d: %w", len(p.DeviceUUIDs), MaxDevices, ErrTooLarge)
	}
	b := le.AppendUint32(nil, p.PID)
	b = le.AppendUint64(b, p.StartTime)
	b = le.AppendUint32(b, p.CUDAVersion)
	b = le.AppendUint32(b, p.CUPTIVersion)
	var err error
	for _, f := range []struct{ s, what string }{
		{p.Executable, "executable"}, {p.Cgroup, "cgroup"}, {p.Pod, "pod"},
		{p.Namespace, "namespace"}, {p.Container, "container"},
	} {
		if b, err = appendStr(b, f.s, f.what); err != nil {
			return fmt.Errorf("encoding hello: %w", err)
		}
	}
	b = le.AppendUint16(b, uint16(len(p.DeviceUUIDs)))
	for _, u := range p.DeviceUUIDs {
		if b, err = appendStr(b, u, "device uuid"); err != nil {
			return fmt.Errorf("encoding hello: %w", err)
		}
	}
	return e.flush(FrameHello, b)
}

// Records writes recs as one or more records frames, each carrying
// dropTotal, preceded by a strings frame for names not sent before.
func (e *Encoder) Records(dropTotal uint64, recs []record.Record) error {
	for len(recs) > 0 {
		n := min(len(recs), MaxRecordsPerFrame)
		if err := e.records(dropTotal, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

func (e *Encoder) records(dropTotal uint64, recs []record.Record) error {
	var strs []byte
	count := uint32(0)
	for _, r := range recs {
		if r.Name == "" {
			continue
		}
		if _, ok := e.names[r.Name]; ok {
			continue
		}
		if len(r.Name) > MaxString {
			return fmt.Errorf("encoding kernel name: %d bytes > %d: %w", len(r.Name), MaxString, ErrTooLarge)
		}
		if len(e.names) >= MaxNameID || e.bytes+len(r.Name) > MaxStringBytes {
			return fmt.Errorf("encoding kernel name: string table full: %w", ErrTooLarge)
		}
		if len(strs)+6+len(r.Name) > MaxPayload-4 {
			if err := e.flushStrings(count, strs); err != nil {
				return err
			}
			strs, count = nil, 0
		}
		id := uint32(len(e.names) + 1)
		e.names[r.Name] = id
		e.bytes += len(r.Name)
		strs = le.AppendUint32(strs, id)
		strs = le.AppendUint16(strs, uint16(len(r.Name)))
		strs = append(strs, r.Name...)
		count++
	}
	if count > 0 {
		if err := e.flushStrings(count, strs); err != nil {
			return err
		}
	}
	b := make([]byte, recordsHeader, recordsHeader+len(recs)*RecordSize)
	le.PutUint64(b, dropTotal)
	le.PutUint32(b[8:], uint32(len(recs)))
	le.PutUint16(b[12:], RecordSize)
	for _, r := range recs {
		var rec [RecordSize]byte
		rec[0], rec[1], rec[2], rec[3], rec[4] = byte(r.Kind), byte(r.CopyKind), byte(r.SrcKind), byte(r.DstKind), byte(r.MemoryKind)
		le.PutUint32(rec[8:], r.Device)
		le.PutUint32(rec[12:], r.Stream)
		le.PutUint64(rec[16:], r.Start)
		if r.End > r.Start {
			le.PutUint64(rec[24:], r.End-r.Start)
		}
		le.PutUint64(rec[32:], r.Bytes)
		le.PutUint32(rec[40:], e.names[r.Name]) // 0 for ""
		if r.Kind == record.KindMemcpy && r.CopyKind == copyPtoP {
			le.PutUint32(rec[44:], r.SrcDevice)
		}
		b = append(b, rec[:]...)
	}
	return e.flush(FrameRecords, b)
}

func (e *Encoder) flushStrings(count uint32, entries []byte) error {
	b := le.AppendUint32(make([]byte, 0, 4+len(entries)), count)
	return e.flush(FrameStrings, append(b, entries...))
}

func appendDrops(b []byte, d *Drops) []byte {
	b = le.AppendUint16(b, uint16(NumDropReasons))
	b = le.AppendUint16(b, 0)
	for _, v := range d {
		b = le.AppendUint64(b, v)
	}
	return b
}

// Drops writes a drops frame with the cumulative counters d.
func (e *Encoder) Drops(d Drops) error {
	return e.flush(FrameDrops, appendDrops(nil, &d))
}

// Goodbye writes the final frame: records sent in total and the final drops.
func (e *Encoder) Goodbye(sentRecords uint64, d Drops) error {
	return e.flush(FrameGoodbye, appendDrops(le.AppendUint64(nil, sentRecords), &d))
}

// Coverage writes spans (in time order, each End > Start) as one or more coverage frames.
func (e *Encoder) Coverage(spans []record.Interval) error {
	if e.version < 2 {
		return fmt.Errorf("encoding coverage frame: needs wire version 2, encoder writes %d: %w", e.version, ErrUnsupportedVersion)
	}
	for len(spans) > 0 {
		n := min(len(spans), MaxSpansPerFrame)
		b := make([]byte, coverageHeader, coverageHeader+n*SpanSize)
		le.PutUint32(b, uint32(n))
		for _, s := range spans[:n] {
			b = le.AppendUint64(b, s.Start)
			b = le.AppendUint64(b, s.End)
			var f uint32
			if s.Lossy {
				f = SpanLossy
			}
			b = le.AppendUint32(b, f)
			b = le.AppendUint32(b, 0)
		}
		if err := e.flush(FrameCoverage, b); err != nil {
			return err
		}
		spans = spans[n:]
	}
	return nil
}

// Launch writes a launch frame (wire version 3): the sender's first work-submitting API call
// after a quiet spell.
func (e *Encoder) Launch(l Launch) error {
	if e.version < 3 {
		return fmt.Errorf("encoding launch frame: needs wire version 3, encoder writes %d: %w", e.version, ErrUnsupportedVersion)
	}
	b := le.AppendUint64(make([]byte, 0, LaunchSize), l.Time)
	b = le.AppendUint32(b, l.API)
	return e.flush(FrameLaunch, le.AppendUint32(b, l.CBID))
}
