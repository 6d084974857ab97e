package recording

import (
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// healthCarry shifts replayed health snapshots into the present and keeps their counters
// increasing across the passes of a looping replay: on every pass a counter series carries
// the increase it made during the previous passes, and its start time stays the one of the
// first pass, so a loop is no counter reset.
type healthCarry struct {
	first0 uint64             // the first pass's offset: counter starts are shifted by it
	carry  map[string]float64 // series -> increase of the finished passes
	first  map[string]float64 // series -> first recorded value in this pass
	last   map[string]float64 // series -> last recorded value in this pass
}

func newHealthCarry(offset uint64) *healthCarry {
	return &healthCarry{first0: offset, carry: map[string]float64{}, first: map[string]float64{}, last: map[string]float64{}}
}

// shift returns s with its time moved by offset, counter starts moved by the first pass's
// offset and counter values raised by the increase of the previous passes. It modifies s.
func (h *healthCarry) shift(s *snapshot.Snapshot, offset uint64) *snapshot.Snapshot {
	s.Time = shiftTime(s.Time, offset)
	for _, f := range s.Families {
		counter := f.Desc.Kind == snapshot.KindCounter
		for i := range f.Samples {
			x := &f.Samples[i]
			x.Start = shiftTime(x.Start, h.first0)
			if !counter {
				continue
			}
			k := seriesKey(f.Desc.Name, x.LabelValues)
			if _, ok := h.first[k]; !ok {
				h.first[k] = x.Value
			}
			h.last[k] = x.Value
			x.Value += h.carry[k]
		}
	}
	return s
}

// endPass adds each counter's increase over the pass just ended to its carry. A counter
// that went down within the recording (its source restarted) carries nothing for the pass.
func (h *healthCarry) endPass() {
	for k, l := range h.last {
		if d := l - h.first[k]; d > 0 {
			h.carry[k] += d
		}
	}
	clear(h.first)
	clear(h.last)
}

func shiftTime(t time.Time, offset uint64) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(time.Duration(offset))
}

func seriesKey(name string, values []string) string {
	return name + "\xff" + strings.Join(values, "\xff")
}
