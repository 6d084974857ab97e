package recording

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Magic starts every recording; Version follows it as a little-endian uint16, then two
// reserved bytes (zero). Writers write Version; readers read MinVersion..Version.
const (
	Magic = "CUPTIREC"
	// 2: activity records carry src_device (peer-to-peer copies); 3: coverage frames;
	// 4: health family and health frames; 5: NVML process frames.
	Version = 6
	// MinVersion is the oldest version a reader accepts (version 1 lacks src_device).
	MinVersion = 1

	fileHeaderSize  = 12
	frameHeaderSize = 1 + 4 + 8 // type, payload length, time
	frameTrailer    = 4         // CRC-32C
	// MaxPayload bounds one frame's payload, and so every allocation of the reader.
	MaxPayload = 16 << 20
	// maxMetricSets bounds the metric sets a reader keeps.
	maxMetricSets = 4096
)

// FrameType is the type byte of a frame.
type FrameType uint8

// Frame types. JSON payloads are marked (J), binary ones (B); see docs/recording-format.md.
const (
	FrameHeader    FrameType = 'H' // (J) Header; always the first frame
	FrameDevices   FrameType = 'D' // (J) []pmdata.Device
	FrameCatalog   FrameType = 'C' // (J) []pmdata.CatalogEntry
	FrameMetricSet FrameType = 'M' // (J) metricSet: the metric list batches refer to
	FrameBatch     FrameType = 'B' // (B) pmdata.Batch
	FrameHello     FrameType = 'P' // (J) ProcessEvent: an activity process connected
	FrameGoodbye   FrameType = 'G' // (J) ProcessEvent: an activity process went away
	FrameActivity  FrameType = 'A' // (B) ActivityBatch
	FrameCoverage  FrameType = 'V' // (B) CoverageBatch (version 3)
	FrameFamily    FrameType = 'F' // (J) familyDef: a health family health frames refer to (version 4)
	FrameHealth    FrameType = 'N' // (B) *snapshot.Snapshot of the health source (version 4)
	FrameProcesses FrameType = 'U' // (J) ProcessesFrame: NVML's compute processes of one GPU (version 5)
	FrameEnd       FrameType = 'E' // (empty) the writer closed the file
)

func (t FrameType) String() string {
	switch t {
	case FrameHeader:
		return "header"
	case FrameDevices:
		return "devices"
	case FrameCatalog:
		return "catalog"
	case FrameMetricSet:
		return "metric-set"
	case FrameBatch:
		return "batch"
	case FrameHello:
		return "hello"
	case FrameGoodbye:
		return "goodbye"
	case FrameActivity:
		return "activity"
	case FrameCoverage:
		return "coverage"
	case FrameFamily:
		return "family"
	case FrameHealth:
		return "health"
	case FrameProcesses:
		return "processes"
	case FrameEnd:
		return "end"
	}
	return fmt.Sprintf("unknown(%#x)", uint8(t))
}

// Header is the first frame of every recording.
type Header struct {
	Version     int    `json:"version"`
	Created     string `json:"created"` // RFC 3339
	Producer    string `json:"producer"`
	Host        string `json:"host,omitempty"`
	Synthetic   bool   `json:"synthetic"` // generated data, not measured on a GPU
	Description string `json:"description,omitempty"`
	IntervalNS  uint64 `json:"interval_ns,omitempty"` // PM sampling interval
}

// ProcessEvent is an activity process connecting (hello) or leaving (goodbye). Conn
// identifies the connection within the recording.
type ProcessEvent struct {
	Conn    uint64          `json:"conn"`
	Process *record.Process `json:"process,omitempty"` // hello only
}

// ProcessesFrame is a processes frame as the file keeps it: a gpuprocs.Observation with
// times in ns, as sample times, and an unknown share left out.
type ProcessesFrame struct {
	GPU       string         `json:"gpu"`
	UUID      string         `json:"uuid"`
	Start     uint64         `json:"start_ns"`
	End       uint64         `json:"end_ns"`
	Shares    bool           `json:"shares"`        // the driver answered per-process utilisation
	MIG       bool           `json:"mig,omitempty"` // the GPU is in MIG mode (version 6)
	Processes []ProcessEntry `json:"processes"`
}

// ProcessEntry is one process of a ProcessesFrame.
type ProcessEntry struct {
	PID uint32 `json:"pid"`
	// SMShare is the share of the period a kernel of the process ran (0..1); nil: unknown.
	SMShare   *float64 `json:"sm_share,omitempty"`
	Namespace string   `json:"namespace,omitempty"`
	Pod       string   `json:"pod,omitempty"`
	Container string   `json:"container,omitempty"`
	// MPS is the process's part in the Multi-Process Service (version 6):
	// gpuprocs.MPSServer, gpuprocs.MPSClient or "" (not under MPS).
	MPS string `json:"mps,omitempty"`
}

// processesFrame is o as the file keeps it (a NaN share becomes unknown).
func processesFrame(o gpuprocs.Observation) ProcessesFrame {
	f := ProcessesFrame{GPU: o.GPU, UUID: o.UUID, Start: uint64(o.Start.UnixNano()), End: uint64(o.End.UnixNano()),
		Shares: o.Shares, MIG: o.MIG, Processes: make([]ProcessEntry, len(o.Processes))}
	for i, q := range o.Processes {
		f.Processes[i] = ProcessEntry{PID: q.PID, Namespace: q.Namespace, Pod: q.Pod, Container: q.Container, MPS: q.MPS}
		if !math.IsNaN(q.SMShare) {
			s := q.SMShare
			f.Processes[i].SMShare = &s
		}
	}
	return f
}

// Observation is the frame as the health source reported it (an unknown share is NaN).
func (f *ProcessesFrame) Observation() gpuprocs.Observation {
	o := gpuprocs.Observation{GPU: f.GPU, UUID: f.UUID, Start: time.Unix(0, int64(f.Start)), End: time.Unix(0, int64(f.End)),
		Shares: f.Shares, MIG: f.MIG, Processes: make([]gpuprocs.Process, len(f.Processes))}
	for i, q := range f.Processes {
		o.Processes[i] = gpuprocs.Process{PID: q.PID, SMShare: math.NaN(), Namespace: q.Namespace, Pod: q.Pod, Container: q.Container, MPS: q.MPS}
		if q.SMShare != nil {
			o.Processes[i].SMShare = *q.SMShare
		}
	}
	return o
}

// maxObservedProcesses bounds the processes of one processes frame (the health source
// reports at most 256 per GPU).
const maxObservedProcesses = 1024

// ActivityBatch is a batch of activity records from one connection, with the number of
// records the sender dropped since its previous batch.
type ActivityBatch struct {
	Conn    uint64
	Dropped uint64
	Records []record.Record
}

// CoverageBatch is the spans of time a traced connection reported it traced (the wire
// format's coverage frame), in time order.
type CoverageBatch struct {
	Conn  uint64
	Spans []record.Interval
}

// spanSize is the encoded size of one coverage span: start, end, flags.
const spanSize = 8 + 8 + 1

func encodeCoverage(dst []byte, c *CoverageBatch) []byte {
	dst = binary.AppendUvarint(dst, c.Conn)
	dst = binary.AppendUvarint(dst, uint64(len(c.Spans)))
	for _, s := range c.Spans {
		dst = binary.LittleEndian.AppendUint64(dst, s.Start)
		dst = binary.LittleEndian.AppendUint64(dst, s.End)
		var f byte
		if s.Lossy {
			f = 1
		}
		dst = append(dst, f)
	}
	return dst
}

func decodeCoverage(p []byte) (*CoverageBatch, error) {
	d := &decoder{b: p}
	c := &CoverageBatch{Conn: d.uvarint("conn")}
	n := d.uvarint("span count")
	if d.err == nil && n != uint64(len(d.b))/spanSize {
		d.fail("%d spans do not fill the %d remaining bytes", n, len(d.b))
	}
	if d.err == nil && uint64(len(d.b))%spanSize != 0 {
		d.fail("%d trailing bytes", uint64(len(d.b))%spanSize)
	}
	if d.err != nil {
		return nil, d.err
	}
	c.Spans = make([]record.Interval, n)
	for i := range c.Spans {
		s := &c.Spans[i]
		s.Start, s.End = d.u64(), d.u64()
		f := d.u8()
		if f&^1 != 0 {
			return nil, fmt.Errorf("span %d: unknown flags %#x", i, f)
		}
		s.Lossy = f&1 != 0
		if s.End <= s.Start {
			return nil, fmt.Errorf("span %d: end %d <= start %d", i, s.End, s.Start)
		}
		if i > 0 && s.Start < c.Spans[i-1].End {
			return nil, fmt.Errorf("span %d starts at %d, before the previous span ends (%d)", i, s.Start, c.Spans[i-1].End)
		}
	}
	return c, d.err
}

type metricSet struct {
	ID      uint64   `json:"id"`
	Metrics []string `json:"metrics"`
}

// Sentinel errors; every error of the reader wraps one of them in a *FormatError.
var (
	ErrTruncated = errors.New("truncated")
	ErrCorrupt   = errors.New("corrupt")
)

// FormatError locates a problem in a recording.
type FormatError struct {
	Offset int64 // byte offset of the frame (or file header) at fault
	Err    error // ErrTruncated or ErrCorrupt
	Detail string
}

func (e *FormatError) Error() string {
	if errors.Is(e.Err, ErrTruncated) {
		return fmt.Sprintf("recording truncated at byte %d: %s", e.Offset, e.Detail)
	}
	return fmt.Sprintf("recording corrupt at byte %d: %s", e.Offset, e.Detail)
}

func (e *FormatError) Unwrap() error { return e.Err }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func metricSetKey(m []string) string { return strings.Join(m, "\x00") }

// encodeBatch appends the binary form of b (whose metric list is set id) to dst.
func encodeBatch(dst []byte, id uint64, b *pmdata.Batch) []byte {
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendVarint(dst, int64(b.Device))
	for _, v := range []int{b.DroppedFirst, b.SkippedInvalid, b.LostImageFull, b.Overflows, b.DecodeErrors} {
		dst = binary.AppendVarint(dst, int64(v))
	}
	dst = binary.AppendUvarint(dst, uint64(len(b.Samples)))
	for _, s := range b.Samples {
		dst = binary.LittleEndian.AppendUint64(dst, s.Start)
		dst = binary.LittleEndian.AppendUint64(dst, s.End)
		for i := range b.Metrics {
			v := math.NaN()
			if i < len(s.Values) {
				v = s.Values[i]
			}
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		}
	}
	return dst
}

// decoder reads a payload; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, a...)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad %s", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad %s", what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) count(what string) int {
	v := d.varint(what)
	if v < 0 || v > math.MaxInt32 {
		d.fail("%s out of range: %d", what, v)
		return 0
	}
	return int(v)
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("short payload")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 4 {
		d.fail("short payload")
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *decoder) u8() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("short payload")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) str(what string) string {
	n := d.uvarint(what + " length")
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("%s length %d exceeds payload", what, n)
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// decodeBatch decodes a batch payload; sets maps metric-set ids to their metric lists.
func decodeBatch(p []byte, sets map[uint64][]string) (*pmdata.Batch, error) {
	d := &decoder{b: p}
	id := d.uvarint("metric set id")
	b := &pmdata.Batch{}
	b.Device = d.count("device")
	b.DroppedFirst = d.count("dropped_first")
	b.SkippedInvalid = d.count("skipped_invalid")
	b.LostImageFull = d.count("lost_image_full")
	b.Overflows = d.count("overflows")
	b.DecodeErrors = d.count("decode_errors")
	n := d.uvarint("sample count")
	if d.err != nil {
		return nil, d.err
	}
	metrics, ok := sets[id]
	if !ok {
		return nil, fmt.Errorf("batch refers to unknown metric set %d", id)
	}
	b.Metrics = metrics
	per := uint64(16 + 8*len(metrics))
	if n > uint64(len(d.b))/per || n*per != uint64(len(d.b)) {
		return nil, fmt.Errorf("batch of %d samples x %d metrics does not fit its %d remaining bytes", n, len(metrics), len(d.b))
	}
	b.Samples = make([]pmdata.Sample, n)
	values := make([]float64, int(n)*len(metrics))
	for i := range b.Samples {
		s := &b.Samples[i]
		s.Start = d.u64()
		s.End = d.u64()
		s.Values = values[:len(metrics):len(metrics)]
		values = values[len(metrics):]
		for j := range s.Values {
			s.Values[j] = math.Float64frombits(d.u64())
		}
	}
	return b, d.err
}

// minRecordSize is the smallest encoded activity record (a name index of one byte).
const minRecordSize = 1 + 4 + 4 + 8 + 8 + 8 + 4 + 1

func encodeActivity(dst []byte, a *ActivityBatch) []byte {
	dst = binary.AppendUvarint(dst, a.Conn)
	dst = binary.AppendUvarint(dst, a.Dropped)
	names := map[string]uint64{}
	var order []string
	for _, r := range a.Records {
		if r.Name == "" {
			continue
		}
		if _, ok := names[r.Name]; !ok {
			names[r.Name] = uint64(len(order)) + 1
			order = append(order, r.Name)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, s := range order {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(a.Records)))
	for _, r := range a.Records {
		dst = append(dst, byte(r.Kind))
		dst = binary.LittleEndian.AppendUint32(dst, r.Device)
		dst = binary.LittleEndian.AppendUint32(dst, r.Stream)
		dst = binary.LittleEndian.AppendUint64(dst, r.Start)
		dst = binary.LittleEndian.AppendUint64(dst, r.End)
		dst = binary.LittleEndian.AppendUint64(dst, r.Bytes)
		dst = append(dst, byte(r.CopyKind), byte(r.SrcKind), byte(r.DstKind), byte(r.MemoryKind))
		dst = binary.AppendUvarint(dst, uint64(r.SrcDevice)) // version 2
		dst = binary.AppendUvarint(dst, names[r.Name])
	}
	return dst
}

// decodeActivity decodes an activity payload of a recording of the given version.
func decodeActivity(p []byte, version int) (*ActivityBatch, error) {
	d := &decoder{b: p}
	a := &ActivityBatch{Conn: d.uvarint("conn"), Dropped: d.uvarint("dropped")}
	nn := d.uvarint("name count")
	if d.err == nil && nn > uint64(len(d.b)) {
		d.fail("name count %d exceeds payload", nn)
	}
	if d.err != nil {
		return nil, d.err
	}
	names := make([]string, nn)
	for i := range names {
		names[i] = d.str("name")
	}
	nr := d.uvarint("record count")
	if d.err == nil && nr > uint64(len(d.b))/minRecordSize {
		d.fail("record count %d exceeds payload", nr)
	}
	if d.err != nil {
		return nil, d.err
	}
	a.Records = make([]record.Record, nr)
	for i := range a.Records {
		r := &a.Records[i]
		r.Kind = record.Kind(d.u8())
		r.Device = d.u32()
		r.Stream = d.u32()
		r.Start = d.u64()
		r.End = d.u64()
		r.Bytes = d.u64()
		r.CopyKind = record.CopyKind(d.u8())
		r.SrcKind = record.MemoryKind(d.u8())
		r.DstKind = record.MemoryKind(d.u8())
		r.MemoryKind = record.MemoryKind(d.u8())
		if version >= 2 {
			sd := d.uvarint("src device")
			if d.err == nil && sd > math.MaxUint32 {
				return nil, fmt.Errorf("record %d: src device %d out of range", i, sd)
			}
			r.SrcDevice = uint32(sd)
		}
		ni := d.uvarint("name index")
		if d.err != nil {
			return nil, d.err
		}
		if ni > uint64(len(names)) {
			return nil, fmt.Errorf("record %d: name index %d out of range", i, ni)
		}
		if ni > 0 {
			r.Name = names[ni-1]
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return a, d.err
}
