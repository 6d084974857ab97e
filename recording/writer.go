package recording

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Writer appends frames to a recording. It is safe for concurrent use. Frames reach the
// underlying writer on Flush and Close (and when the buffer fills), so a reader sees whole
// frames only, plus at most one partial frame at the end while writing goes on.
type Writer struct {
	mu     sync.Mutex
	w      *bufio.Writer
	c      io.Closer
	sets   map[string]uint64
	fams   map[string]uint64 // family definition (JSON without id) -> id
	buf    []byte
	err    error
	closed bool
}

// NewWriter writes the file header and h (Version is set) to w. If w is an io.Closer,
// Close closes it.
func NewWriter(w io.Writer, h Header, time uint64) (*Writer, error) {
	wr := &Writer{w: bufio.NewWriterSize(w, 256<<10), sets: map[string]uint64{}, fams: map[string]uint64{}}
	if c, ok := w.(io.Closer); ok {
		wr.c = c
	}
	var fh [fileHeaderSize]byte
	copy(fh[:], Magic)
	binary.LittleEndian.PutUint16(fh[8:], Version)
	if _, err := wr.w.Write(fh[:]); err != nil {
		return nil, fmt.Errorf("writing recording header: %w", err)
	}
	h.Version = Version
	if err := wr.writeJSON(FrameHeader, time, h); err != nil {
		return nil, err
	}
	return wr, nil
}

// WriteDevices records the device list.
func (w *Writer) WriteDevices(time uint64, d []pmdata.Device) error {
	return w.writeJSON(FrameDevices, time, d)
}

// WriteCatalog records the metric catalog entries in use.
func (w *Writer) WriteCatalog(time uint64, c []pmdata.CatalogEntry) error {
	return w.writeJSON(FrameCatalog, time, c)
}

// WriteBatch records a PM sample batch; a metric-set frame precedes the first batch of
// each distinct metric list.
func (w *Writer) WriteBatch(time uint64, b pmdata.Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := metricSetKey(b.Metrics)
	id, ok := w.sets[key]
	if !ok {
		id = uint64(len(w.sets)) + 1
		p, err := json.Marshal(metricSet{ID: id, Metrics: b.Metrics})
		if err != nil {
			return fmt.Errorf("encoding metric set: %w", err)
		}
		if err := w.frameLocked(FrameMetricSet, time, p); err != nil {
			return err
		}
		w.sets[key] = id
	}
	w.buf = encodeBatch(w.buf[:0], id, &b)
	return w.frameLocked(FrameBatch, time, w.buf)
}

// WriteHello records an activity process connecting as conn.
func (w *Writer) WriteHello(time uint64, e ProcessEvent) error {
	return w.writeJSON(FrameHello, time, e)
}

// WriteGoodbye records the end of activity connection conn.
func (w *Writer) WriteGoodbye(time uint64, conn uint64) error {
	return w.writeJSON(FrameGoodbye, time, ProcessEvent{Conn: conn})
}

// WriteActivity records a batch of activity records.
func (w *Writer) WriteActivity(time uint64, a ActivityBatch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = encodeActivity(w.buf[:0], &a)
	return w.frameLocked(FrameActivity, time, w.buf)
}

// WriteCoverage records the spans a traced connection reported it traced.
func (w *Writer) WriteCoverage(time uint64, c CoverageBatch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = encodeCoverage(w.buf[:0], &c)
	return w.frameLocked(FrameCoverage, time, w.buf)
}

// WriteProcesses records what NVML saw of one GPU's compute processes (version 5).
func (w *Writer) WriteProcesses(time uint64, o gpuprocs.Observation) error {
	return w.writeJSON(FrameProcesses, time, processesFrame(o))
}

// WriteHealth records a snapshot of the health source (version 4): a family frame precedes
// the first snapshot of each distinct family description. Only gauges and counters can be
// recorded, and every sample must have one value per label name.
func (w *Writer) WriteHealth(time uint64, s *snapshot.Snapshot) error {
	if err := checkSnapshot(s); err != nil {
		return fmt.Errorf("recording health: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make(map[*snapshot.Desc]uint64, len(s.Families))
	for _, f := range s.Families {
		if _, ok := ids[f.Desc]; ok {
			continue
		}
		def, err := defOf(f.Desc)
		if err != nil {
			return fmt.Errorf("recording health: %w", err)
		}
		key, err := json.Marshal(def)
		if err != nil {
			return fmt.Errorf("encoding family %s: %w", def.Name, err)
		}
		id, ok := w.fams[string(key)]
		if !ok {
			id = uint64(len(w.fams)) + 1
			def.ID = id
			p, err := json.Marshal(def)
			if err != nil {
				return fmt.Errorf("encoding family %s: %w", def.Name, err)
			}
			if err := w.frameLocked(FrameFamily, time, p); err != nil {
				return err
			}
			w.fams[string(key)] = id
		}
		ids[f.Desc] = id
	}
	w.buf = encodeHealth(w.buf[:0], s, ids)
	return w.frameLocked(FrameHealth, time, w.buf)
}

// Flush pushes buffered frames to the underlying writer.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("writing recording: %w", err)
	}
	return w.err
}

// Close writes the end frame, flushes and closes the underlying writer. It is idempotent.
func (w *Writer) Close(time uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	err := w.frameLocked(FrameEnd, time, nil)
	if err == nil {
		if ferr := w.w.Flush(); ferr != nil {
			err = fmt.Errorf("writing recording: %w", ferr)
		}
	}
	if w.c != nil {
		if cerr := w.c.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing recording: %w", cerr)
		}
	}
	if w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) writeJSON(t FrameType, time uint64, v any) error {
	p, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding %s frame: %w", t, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.frameLocked(t, time, p)
}

func (w *Writer) frameLocked(t FrameType, time uint64, p []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.closed && t != FrameEnd {
		return fmt.Errorf("writing %s frame: recording closed", t)
	}
	if len(p) > MaxPayload {
		return fmt.Errorf("writing %s frame: payload of %d bytes exceeds the %d-byte limit; flush batches more often", t, len(p), MaxPayload)
	}
	var h [frameHeaderSize]byte
	h[0] = byte(t)
	binary.LittleEndian.PutUint32(h[1:], uint32(len(p)))
	binary.LittleEndian.PutUint64(h[5:], time)
	crc := crc32.Update(0, castagnoli, h[:])
	crc = crc32.Update(crc, castagnoli, p)
	var tr [frameTrailer]byte
	binary.LittleEndian.PutUint32(tr[:], crc)
	for _, b := range [][]byte{h[:], p, tr[:]} {
		if _, err := w.w.Write(b); err != nil {
			w.err = fmt.Errorf("writing recording: %w", err)
			return w.err
		}
	}
	return nil
}
