package recording

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"iter"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Event is one frame of a recording, decoded. Type says which field is set.
type Event struct {
	Type     FrameType
	Time     uint64 // ns on the Unix epoch, when the frame was written
	Header   *Header
	Devices  []pmdata.Device
	Catalog  []pmdata.CatalogEntry
	Batch    *pmdata.Batch
	Process  *ProcessEvent // FrameHello and FrameGoodbye
	Activity *ActivityBatch
	Coverage *CoverageBatch     // FrameCoverage
	Health   *snapshot.Snapshot // FrameHealth: the health source's families at Health.Time
	Procs    *ProcessesFrame    // FrameProcesses
}

// Reader decodes a recording frame by frame. Errors are *FormatError (matching
// ErrTruncated or ErrCorrupt) or errors of the underlying reader; io.EOF marks a clean end
// at a frame boundary. After an error, Next keeps returning it.
type Reader struct {
	r       *bufio.Reader
	off     int64 // offset of the next frame
	header  Header
	version int // file-header version, MinVersion..Version
	sets    map[uint64][]string
	fams    map[uint64]*snapshot.Desc // health families by id
	ended   bool
	err     error
	buf     []byte
}

// NewReader checks the file header and reads the header frame.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 256<<10), sets: map[uint64][]string{}, fams: map[uint64]*snapshot.Desc{}}
	var fh [fileHeaderSize]byte
	n, err := io.ReadFull(rd.r, fh[:])
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if n < len(Magic) && string(fh[:n]) != Magic[:n] {
				return nil, &FormatError{0, ErrCorrupt, "not a cupti-exporter recording (bad magic)"}
			}
			return nil, &FormatError{int64(n), ErrTruncated, "file header incomplete"}
		}
		return nil, fmt.Errorf("reading recording header: %w", err)
	}
	if string(fh[:8]) != Magic {
		return nil, &FormatError{0, ErrCorrupt, "not a cupti-exporter recording (bad magic)"}
	}
	v := binary.LittleEndian.Uint16(fh[8:])
	if v < MinVersion || v > Version {
		return nil, &FormatError{8, ErrCorrupt, fmt.Sprintf("format version %d is not supported (this build reads versions %d..%d)", v, MinVersion, Version)}
	}
	rd.version = int(v)
	if fh[10] != 0 || fh[11] != 0 {
		return nil, &FormatError{10, ErrCorrupt, "reserved header bytes are not zero"}
	}
	rd.off = fileHeaderSize
	ev, err := rd.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FormatError{rd.off, ErrTruncated, "no header frame"}
		}
		return nil, err
	}
	if ev.Type != FrameHeader {
		return nil, &FormatError{fileHeaderSize, ErrCorrupt, fmt.Sprintf("first frame is %s, want header", ev.Type)}
	}
	rd.header = *ev.Header
	return rd, nil
}

// Header is the recording's header frame.
func (r *Reader) Header() Header { return r.header }

// Offset is the byte offset of the next frame.
func (r *Reader) Offset() int64 { return r.off }

// Ended reports whether the end frame was read (the writer closed the file).
func (r *Reader) Ended() bool { return r.ended }

// Events iterates over the events from the reader's position to the recording's end or
// the first error, which Err then reports.
func (r *Reader) Events() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for {
			ev, err := r.Next()
			if err != nil || !yield(ev) {
				return
			}
		}
	}
}

// Err is the error that ended Events or Next: nil at the recording's clean end or while
// events remain.
func (r *Reader) Err() error {
	if errors.Is(r.err, io.EOF) {
		return nil
	}
	return r.err
}

// Next returns the next event. Metric-set and family frames are consumed internally.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		ev, err := r.next()
		if err != nil {
			r.err = err
			return ev, err
		}
		if ev.Type != FrameMetricSet && ev.Type != FrameFamily { // internal to the format
			return ev, nil
		}
	}
}

func (r *Reader) next() (Event, error) {
	start := r.off
	var h [frameHeaderSize]byte
	n, err := io.ReadFull(r.r, h[:])
	if err != nil {
		if errors.Is(err, io.EOF) && n == 0 {
			return Event{}, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Event{}, &FormatError{start, ErrTruncated, fmt.Sprintf("frame header cut after %d of %d bytes", n, frameHeaderSize)}
		}
		return Event{}, fmt.Errorf("reading recording at byte %d: %w", start, err)
	}
	t := FrameType(h[0])
	size := binary.LittleEndian.Uint32(h[1:])
	ev := Event{Type: t, Time: binary.LittleEndian.Uint64(h[5:])}
	if size > MaxPayload {
		return Event{}, &FormatError{start, ErrCorrupt, fmt.Sprintf("%s frame declares %d bytes, above the %d-byte limit", t, size, MaxPayload)}
	}
	if cap(r.buf) < int(size)+frameTrailer {
		r.buf = make([]byte, int(size)+frameTrailer)
	}
	body := r.buf[:int(size)+frameTrailer]
	n, err = io.ReadFull(r.r, body)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Event{}, &FormatError{start, ErrTruncated, fmt.Sprintf("%s frame cut after %d of %d bytes", t, frameHeaderSize+n, frameHeaderSize+len(body))}
		}
		return Event{}, fmt.Errorf("reading recording at byte %d: %w", start, err)
	}
	p := body[:size]
	crc := crc32.Update(crc32.Update(0, castagnoli, h[:]), castagnoli, p)
	if crc != binary.LittleEndian.Uint32(body[size:]) {
		return Event{}, &FormatError{start, ErrCorrupt, fmt.Sprintf("%s frame fails its checksum", t)}
	}
	r.off += int64(frameHeaderSize + len(body))
	if r.ended {
		return Event{}, &FormatError{start, ErrCorrupt, fmt.Sprintf("%s frame after the end frame", t)}
	}
	if err := r.decode(&ev, p); err != nil {
		return Event{}, &FormatError{start, ErrCorrupt, fmt.Sprintf("%s frame: %v", t, err)}
	}
	return ev, nil
}

func (r *Reader) decode(ev *Event, p []byte) error {
	if ev.Type != FrameHeader && r.header.Version == 0 {
		return errors.New("frame before the header frame")
	}
	switch ev.Type {
	case FrameHeader:
		if r.header.Version != 0 {
			return errors.New("second header frame")
		}
		ev.Header = &Header{}
		if err := json.Unmarshal(p, ev.Header); err != nil {
			return err
		}
		if ev.Header.Version != r.version {
			return fmt.Errorf("header says version %d, file header %d", ev.Header.Version, r.version)
		}
		r.header = *ev.Header
	case FrameDevices:
		return json.Unmarshal(p, &ev.Devices)
	case FrameCatalog:
		return json.Unmarshal(p, &ev.Catalog)
	case FrameMetricSet:
		var ms metricSet
		if err := json.Unmarshal(p, &ms); err != nil {
			return err
		}
		if _, dup := r.sets[ms.ID]; dup {
			return fmt.Errorf("metric set %d defined twice", ms.ID)
		}
		if len(r.sets) >= maxMetricSets {
			return fmt.Errorf("more than %d metric sets", maxMetricSets)
		}
		r.sets[ms.ID] = ms.Metrics
		return nil
	case FrameBatch:
		b, err := decodeBatch(p, r.sets)
		ev.Batch = b
		return err
	case FrameHello, FrameGoodbye:
		ev.Process = &ProcessEvent{}
		if err := json.Unmarshal(p, ev.Process); err != nil {
			return err
		}
		if ev.Type == FrameHello && ev.Process.Process == nil {
			return errors.New("hello without process")
		}
	case FrameActivity:
		a, err := decodeActivity(p, r.version)
		ev.Activity = a
		return err
	case FrameCoverage:
		if r.version < 3 {
			return fmt.Errorf("coverage frame in a version-%d recording", r.version)
		}
		c, err := decodeCoverage(p)
		ev.Coverage = c
		return err
	case FrameFamily:
		if r.version < 4 {
			return fmt.Errorf("family frame in a version-%d recording", r.version)
		}
		id, d, err := decodeFamily(p)
		if err != nil {
			return err
		}
		if _, dup := r.fams[id]; dup {
			return fmt.Errorf("family %d defined twice", id)
		}
		if len(r.fams) >= maxFamilies {
			return fmt.Errorf("more than %d families", maxFamilies)
		}
		r.fams[id] = d
	case FrameHealth:
		if r.version < 4 {
			return fmt.Errorf("health frame in a version-%d recording", r.version)
		}
		s, err := decodeHealth(p, r.fams)
		ev.Health = s
		return err
	case FrameProcesses:
		if r.version < 5 {
			return fmt.Errorf("processes frame in a version-%d recording", r.version)
		}
		ev.Procs = &ProcessesFrame{}
		if err := json.Unmarshal(p, ev.Procs); err != nil {
			return err
		}
		return checkProcesses(ev.Procs, r.version)
	case FrameEnd:
		if len(p) != 0 {
			return errors.New("end frame with payload")
		}
		r.ended = true
	default:
		return errors.New("unknown frame type")
	}
	return nil
}

// checkProcesses refuses a processes frame no health source writes: a period that ends
// before it starts, too many processes, a share outside 0..1, an unknown MPS role, or an MPS
// role in a recording older than version 6.
func checkProcesses(j *ProcessesFrame, version int) error {
	if j.End <= j.Start {
		return fmt.Errorf("processes period [%d, %d) is empty", j.Start, j.End)
	}
	if j.MIG && version < 6 {
		return fmt.Errorf("MIG processes frame in a version-%d recording", version)
	}
	if len(j.Processes) > maxObservedProcesses {
		return fmt.Errorf("%d processes in one frame (at most %d)", len(j.Processes), maxObservedProcesses)
	}
	for _, p := range j.Processes {
		if s := p.SMShare; s != nil && !(*s >= 0 && *s <= 1) {
			return fmt.Errorf("process %d: SM share %v outside 0..1", p.PID, *s)
		}
		switch {
		case p.MPS != "" && version < 6:
			return fmt.Errorf("process %d: MPS role in a version-%d recording", p.PID, version)
		case p.MPS != "" && p.MPS != gpuprocs.MPSServer && p.MPS != gpuprocs.MPSClient:
			return fmt.Errorf("process %d: unknown MPS role %q", p.PID, p.MPS)
		}
	}
	return nil
}
