package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

var le = binary.LittleEndian

// Decoder reads the frames of one connection. Create it with NewDecoder.
type Decoder struct {
	r       *bufio.Reader
	hdr     [HeaderSize]byte
	payload []byte // reused; grows up to MaxPayload

	names      []string // index = string id
	defined    []bool
	namesBytes int

	reserve func(n int) error // see SetReserve; nil: no accounting

	frames    uint64 // frames read, for error messages
	sawHello  bool
	sawGoodby bool
	version   uint8  // the connection's wire version, from its first frame
	spanEnd   uint64 // end of the last coverage span: spans come in time order
}

// Version returns the wire version of the connection (0 before its first frame).
// A version-1 sender never reports coverage: count its process as untraced.
func (d *Decoder) Version() int { return int(d.version) }

// NewDecoder returns a Decoder reading frames from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
}

// SetReserve makes the decoder call reserve before it keeps n more bytes: string-table
// entries (the bytes plus their slot), and growth of its payload and record buffers. When
// reserve returns an error the decoder keeps nothing more and returns the error, wrapped;
// the stream is then unusable. The caller releases what it reserved when the decoder is
// dropped. Used by the receiver to hold all connections to one memory budget.
func (d *Decoder) SetReserve(reserve func(n int) error) { d.reserve = reserve }

// charge asks reserve, if set, for n bytes.
func (d *Decoder) charge(n int) error {
	if d.reserve == nil || n <= 0 {
		return nil
	}
	return d.reserve(n)
}

// recordBytes is the memory of one decoded record, for SetReserve.
const recordBytes = int(unsafe.Sizeof(record.Record{}))

// nameSlotBytes is the memory of one string-table slot beyond its bytes, for SetReserve.
const nameSlotBytes = int(unsafe.Sizeof("")) + 1

// Next reads frames until one that carries a message and returns it in a new
// Message. It returns io.EOF when the stream ends cleanly between frames.
func (d *Decoder) Next() (*Message, error) {
	m := new(Message)
	if err := d.ReadInto(m); err != nil {
		return nil, err
	}
	return m, nil
}

// ReadInto is Next without allocation: it overwrites m, reusing the capacity
// of m.Records (records of the previous call are overwritten). Any error other
// than io.EOF means the stream is unusable; close the connection.
func (d *Decoder) ReadInto(m *Message) error {
	for {
		t, p, err := d.readFrame()
		if err != nil {
			return err
		}
		if err := d.order(t); err != nil {
			return err
		}
		recs, spans := m.Records[:0], m.Coverage[:0]
		*m = Message{Type: t}
		switch t {
		case FrameHello:
			err = decodeHello(p, &m.Process)
		case FrameStrings:
			err = d.decodeStrings(p)
		case FrameRecords:
			m.Records, m.DropTotal, err = d.decodeRecords(p, recs)
		case FrameDrops:
			err = decodeDrops(p, &m.Drops)
			m.DropTotal = m.Drops.Total()
		case FrameGoodbye:
			if len(p) < 8 {
				err = fmt.Errorf("records total: %d bytes, need 8: %w", len(p), ErrMalformed)
				break
			}
			m.SentRecords = le.Uint64(p)
			err = decodeDrops(p[8:], &m.Drops)
			m.DropTotal = m.Drops.Total()
		case FrameCoverage:
			m.Coverage, err = d.decodeCoverage(p, spans)
		case FrameLaunch:
			m.Launch, err = decodeLaunch(p)
		}
		if t != FrameRecords {
			m.Records = recs // keep the capacity for the next call
		}
		if t != FrameCoverage {
			m.Coverage = spans
		}
		if err != nil {
			return fmt.Errorf("decoding %s frame %d: %w", t, d.frames, err)
		}
		if t != FrameStrings {
			return nil
		}
	}
}

// decodeLaunch reads a launch frame: exactly LaunchSize bytes, a driver or runtime call
// with a time.
func decodeLaunch(p []byte) (Launch, error) {
	if len(p) != LaunchSize {
		return Launch{}, fmt.Errorf("payload %d bytes, want %d: %w", len(p), LaunchSize, ErrMalformed)
	}
	l := Launch{Time: le.Uint64(p), API: le.Uint32(p[8:]), CBID: le.Uint32(p[12:])}
	switch {
	case l.Time == 0:
		return Launch{}, fmt.Errorf("time 0: %w", ErrMalformed)
	case l.API != LaunchDriver && l.API != LaunchRuntime:
		return Launch{}, fmt.Errorf("api %d, want %d (driver) or %d (runtime): %w", l.API, LaunchDriver, LaunchRuntime, ErrMalformed)
	}
	return l, nil
}

// readFrame reads one header and payload. The payload is valid until the next call.
func (d *Decoder) readFrame() (FrameType, []byte, error) {
	if _, err := io.ReadFull(d.r, d.hdr[:]); err != nil {
		if err == io.EOF {
			return 0, nil, io.EOF
		}
		return 0, nil, fmt.Errorf("reading frame %d header: %w", d.frames+1, unexpected(err))
	}
	d.frames++
	h := d.hdr[:]
	if le.Uint32(h[0:]) != Magic {
		return 0, nil, fmt.Errorf("reading frame %d header: magic %#08x: %w", d.frames, le.Uint32(h[0:]), ErrBadMagic)
	}
	if h[4] < MinVersion || h[4] > Version {
		return 0, nil, fmt.Errorf("reading frame %d header: version %d, want %d..%d: %w", d.frames, h[4], MinVersion, Version, ErrUnsupportedVersion)
	}
	if d.version == 0 {
		d.version = h[4]
	} else if h[4] != d.version {
		return 0, nil, fmt.Errorf("reading frame %d header: version %d on a version-%d connection: %w", d.frames, h[4], d.version, ErrMalformed)
	}
	t := FrameType(h[5])
	if t < FrameHello || t > lastFrame(d.version) {
		return 0, nil, fmt.Errorf("reading frame %d header: unknown type %d in version %d: %w", d.frames, h[5], d.version, ErrMalformed)
	}
	if f := le.Uint16(h[6:]); f != 0 {
		return 0, nil, fmt.Errorf("reading frame %d header: flags %#x, want 0: %w", d.frames, f, ErrMalformed)
	}
	n := le.Uint32(h[8:])
	if n > MaxPayload {
		return 0, nil, fmt.Errorf("reading %s frame %d: payload %d bytes > %d: %w", t, d.frames, n, MaxPayload, ErrTooLarge)
	}
	if cap(d.payload) < int(n) {
		if err := d.charge(int(n) - cap(d.payload)); err != nil {
			return 0, nil, fmt.Errorf("reading %s frame %d: payload buffer of %d bytes: %w", t, d.frames, n, err)
		}
		d.payload = make([]byte, n)
	}
	p := d.payload[:n]
	if _, err := io.ReadFull(d.r, p); err != nil {
		return 0, nil, fmt.Errorf("reading %s frame %d payload (%d bytes): %w", t, d.frames, n, unexpected(err))
	}
	return t, p, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// order enforces hello first, exactly once, and nothing after goodbye.
func (d *Decoder) order(t FrameType) error {
	switch {
	case d.sawGoodby:
		return fmt.Errorf("%s frame %d after goodbye: %w", t, d.frames, ErrMalformed)
	case t == FrameHello && d.sawHello:
		return fmt.Errorf("second hello (frame %d): %w", d.frames, ErrMalformed)
	case t != FrameHello && !d.sawHello:
		return fmt.Errorf("%s frame %d before hello: %w", t, d.frames, ErrMalformed)
	}
	d.sawHello = true
	d.sawGoodby = t == FrameGoodbye
	return nil
}

// cursor reads little-endian fields and remembers the first shortfall.
type cursor struct {
	p   []byte
	err error
}

func (c *cursor) take(n int, what string) []byte {
	if c.err != nil {
		return nil
	}
	if len(c.p) < n {
		c.err = fmt.Errorf("%s: %d bytes left, need %d: %w", what, len(c.p), n, ErrMalformed)
		return nil
	}
	b := c.p[:n]
	c.p = c.p[n:]
	return b
}

func (c *cursor) u16(what string) uint16 {
	if b := c.take(2, what); b != nil {
		return le.Uint16(b)
	}
	return 0
}

func (c *cursor) u32(what string) uint32 {
	if b := c.take(4, what); b != nil {
		return le.Uint32(b)
	}
	return 0
}

func (c *cursor) u64(what string) uint64 {
	if b := c.take(8, what); b != nil {
		return le.Uint64(b)
	}
	return 0
}

func (c *cursor) str(what string) string {
	n := c.u16(what + " length")
	if c.err == nil && n > MaxString {
		c.err = fmt.Errorf("%s: %d bytes > %d: %w", what, n, MaxString, ErrTooLarge)
	}
	return string(c.take(int(n), what))
}

func decodeHello(p []byte, proc *record.Process) error {
	c := cursor{p: p}
	proc.PID = c.u32("pid")
	proc.StartTime = c.u64("start time")
	proc.CUDAVersion = c.u32("cuda version")
	proc.CUPTIVersion = c.u32("cupti version")
	proc.Executable = c.str("executable")
	proc.Cgroup = c.str("cgroup")
	proc.Pod = c.str("pod")
	proc.Namespace = c.str("namespace")
	proc.Container = c.str("container")
	n := c.u16("device count")
	if c.err == nil && n > MaxDevices {
		return fmt.Errorf("device count %d > %d: %w", n, MaxDevices, ErrTooLarge)
	}
	if c.err == nil {
		proc.DeviceUUIDs = make([]string, n)
		for i := range proc.DeviceUUIDs {
			proc.DeviceUUIDs[i] = c.str(fmt.Sprintf("device %d uuid", i))
		}
	}
	return c.err // trailing bytes are ignored (appended fields)
}

func (d *Decoder) decodeStrings(p []byte) error {
	c := cursor{p: p}
	n := c.u32("count")
	for i := uint32(0); i < n && c.err == nil; i++ {
		id := c.u32("id")
		s := c.str("string")
		if c.err != nil {
			return fmt.Errorf("entry %d: %w", i, c.err)
		}
		if err := d.define(id, s); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
	}
	if c.err != nil {
		return c.err
	}
	if len(c.p) != 0 {
		return fmt.Errorf("%d bytes after %d entries: %w", len(c.p), n, ErrMalformed)
	}
	return nil
}

func (d *Decoder) define(id uint32, s string) error {
	if id == 0 || id > MaxNameID {
		return fmt.Errorf("id %d outside 1..%d: %w", id, MaxNameID, ErrMalformed)
	}
	if int(id) < len(d.defined) && d.defined[id] {
		return fmt.Errorf("id %d defined twice: %w", id, ErrMalformed)
	}
	if d.namesBytes+len(s) > MaxStringBytes {
		return fmt.Errorf("string table: %d bytes > %d: %w", d.namesBytes+len(s), MaxStringBytes, ErrTooLarge)
	}
	if grow := int(id) + 1 - len(d.defined); d.reserve != nil {
		if err := d.charge(len(s) + max(grow, 0)*nameSlotBytes); err != nil {
			return fmt.Errorf("string table: id %d (%d bytes): %w", id, len(s), err)
		}
	}
	for int(id) >= len(d.defined) {
		d.names = append(d.names, "")
		d.defined = append(d.defined, false)
	}
	d.names[id] = s
	d.defined[id] = true
	d.namesBytes += len(s)
	return nil
}

// Name returns the string-table entry id and whether it is defined.
func (d *Decoder) Name(id uint32) (string, bool) {
	if int(id) < len(d.defined) && d.defined[id] {
		return d.names[id], true
	}
	return "", false
}

func (d *Decoder) decodeRecords(p []byte, dst []record.Record) ([]record.Record, uint64, error) {
	if len(p) < recordsHeader {
		return dst, 0, fmt.Errorf("header: %d bytes, need %d: %w", len(p), recordsHeader, ErrMalformed)
	}
	drops := le.Uint64(p)
	n := int(le.Uint32(p[8:]))
	size := int(le.Uint16(p[12:]))
	if r := le.Uint16(p[14:]); r != 0 {
		return dst, drops, fmt.Errorf("reserved field %#x, want 0: %w", r, ErrMalformed)
	}
	if size < RecordSize {
		return dst, drops, fmt.Errorf("record size %d < %d: %w", size, RecordSize, ErrMalformed)
	}
	body := p[recordsHeader:]
	if n > len(body)/size || n*size != len(body) {
		return dst, drops, fmt.Errorf("%d records of %d bytes do not fill %d bytes: %w", n, size, len(body), ErrMalformed)
	}
	if cap(dst) < n {
		if err := d.charge((n - cap(dst)) * recordBytes); err != nil {
			return dst[:0], drops, fmt.Errorf("record buffer of %d records: %w", n, err)
		}
		dst = make([]record.Record, 0, n)
	}
	dst = dst[:n]
	for i := range dst {
		b := body[i*size : i*size+RecordSize]
		r := &dst[i]
		r.Kind = record.Kind(b[0])
		if !validKind(r.Kind) {
			return dst[:0], drops, fmt.Errorf("record %d: unknown kind %d: %w", i, b[0], ErrMalformed)
		}
		r.CopyKind = record.CopyKind(b[1])
		r.SrcKind = record.MemoryKind(b[2])
		r.DstKind = record.MemoryKind(b[3])
		r.MemoryKind = record.MemoryKind(b[4])
		r.Device = le.Uint32(b[8:])
		r.Stream = le.Uint32(b[12:])
		r.Start = le.Uint64(b[16:])
		dur := le.Uint64(b[24:])
		r.End = r.Start + dur
		if r.End < r.Start {
			return dst[:0], drops, fmt.Errorf("record %d: start %d + duration %d overflows: %w", i, r.Start, dur, ErrMalformed)
		}
		r.Bytes = le.Uint64(b[32:])
		r.SrcDevice = 0
		if r.Kind == record.KindMemcpy && r.CopyKind == copyPtoP {
			r.SrcDevice = le.Uint32(b[44:]) // reserved (ignored) for other records
		}
		r.Name = ""
		if id := le.Uint32(b[40:]); id != 0 {
			if int(id) >= len(d.defined) || !d.defined[id] {
				return dst[:0], drops, fmt.Errorf("record %d: name id %d not defined: %w", i, id, ErrMalformed)
			}
			r.Name = d.names[id]
		}
	}
	return dst, drops, nil
}

// decodeCoverage reads a coverage frame's spans into dst. Spans must be non-empty and in
// time order, also across the frames of the connection (a span may start where the
// previous one ended).
func (d *Decoder) decodeCoverage(p []byte, dst []record.Interval) ([]record.Interval, error) {
	if len(p) < coverageHeader {
		return dst, fmt.Errorf("header: %d bytes, need %d: %w", len(p), coverageHeader, ErrMalformed)
	}
	n := int(le.Uint32(p))
	if r := le.Uint32(p[4:]); r != 0 {
		return dst, fmt.Errorf("reserved field %#x, want 0: %w", r, ErrMalformed)
	}
	if n > MaxSpansPerFrame {
		return dst, fmt.Errorf("span count %d > %d: %w", n, MaxSpansPerFrame, ErrTooLarge)
	}
	body := p[coverageHeader:]
	if n*SpanSize != len(body) {
		return dst, fmt.Errorf("%d spans of %d bytes do not fill %d bytes: %w", n, SpanSize, len(body), ErrMalformed)
	}
	if cap(dst) < n {
		dst = make([]record.Interval, 0, n)
	}
	dst = dst[:n]
	for i := range dst {
		b := body[i*SpanSize : (i+1)*SpanSize]
		start, end, flags := le.Uint64(b), le.Uint64(b[8:]), le.Uint32(b[16:])
		switch {
		case le.Uint32(b[20:]) != 0:
			return dst[:0], fmt.Errorf("span %d: reserved field %#x, want 0: %w", i, le.Uint32(b[20:]), ErrMalformed)
		case end <= start:
			return dst[:0], fmt.Errorf("span %d: end %d <= start %d: %w", i, end, start, ErrMalformed)
		case start < d.spanEnd:
			return dst[:0], fmt.Errorf("span %d: start %d before the end %d of the previous span: %w", i, start, d.spanEnd, ErrMalformed)
		}
		d.spanEnd = end
		dst[i] = record.Interval{Start: start, End: end, Lossy: flags&SpanLossy != 0}
	}
	return dst, nil
}

func decodeDrops(p []byte, out *Drops) error {
	c := cursor{p: p}
	n := c.u16("reason count")
	if r := c.u16("reserved"); c.err == nil && r != 0 {
		return fmt.Errorf("drops reserved field %#x, want 0: %w", r, ErrMalformed)
	}
	if c.err == nil && n > MaxDropReasons {
		return fmt.Errorf("drop reasons %d > %d: %w", n, MaxDropReasons, ErrTooLarge)
	}
	for i := 0; i < int(n) && c.err == nil; i++ {
		v := c.u64("drop counter")
		if i < int(NumDropReasons) {
			out[i] = v
		}
	}
	return c.err
}

// IsMalformed reports whether err is a decoding error caused by the peer's
// bytes (as opposed to an I/O error of the connection).
func IsMalformed(err error) bool {
	return errors.Is(err, ErrMalformed) || errors.Is(err, ErrBadMagic) ||
		errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrTooLarge)
}
