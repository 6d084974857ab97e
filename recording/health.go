package recording

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// maxFamilies bounds the health families a reader keeps; maxLabels the labels of one.
const (
	maxFamilies = 4096
	maxLabels   = 64
)

// familyDef is the JSON payload of a family frame: a health family's description, defined
// once and referred to by id from health frames.
type familyDef struct {
	ID       uint64   `json:"id"`
	Name     string   `json:"name"`
	Help     string   `json:"help,omitempty"`
	Kind     string   `json:"kind"` // "gauge" or "counter"
	Unit     string   `json:"unit,omitempty"`
	OTelName string   `json:"otel_name,omitempty"`
	OTelUnit string   `json:"otel_unit,omitempty"`
	Labels   []string `json:"labels,omitempty"`
}

func defOf(d *snapshot.Desc) (familyDef, error) {
	f := familyDef{Name: d.Name, Help: d.Help, Kind: d.Kind.String(), Unit: d.Unit, OTelName: d.OTelName,
		OTelUnit: d.OTelUnit, Labels: d.LabelNames}
	if d.Kind != snapshot.KindGauge && d.Kind != snapshot.KindCounter {
		return f, fmt.Errorf("family %s: only gauges and counters can be recorded, not %s", d.Name, d.Kind)
	}
	return f, f.check()
}

// check refuses a family that the exporter could not serve: a bad metric or label name, a
// duplicate label, an unknown kind.
func (f *familyDef) check() error {
	if !validName(f.Name, true) {
		return fmt.Errorf("family name %q is not a valid metric name", f.Name)
	}
	if f.Kind != "gauge" && f.Kind != "counter" {
		return fmt.Errorf("family %s: kind %q (want gauge or counter)", f.Name, f.Kind)
	}
	if len(f.Labels) > maxLabels {
		return fmt.Errorf("family %s: %d labels, at most %d", f.Name, len(f.Labels), maxLabels)
	}
	seen := map[string]bool{}
	for _, l := range f.Labels {
		if !validName(l, false) || len(l) >= 2 && l[:2] == "__" {
			return fmt.Errorf("family %s: label name %q is not valid", f.Name, l)
		}
		if seen[l] {
			return fmt.Errorf("family %s: label %q twice", f.Name, l)
		}
		seen[l] = true
	}
	return nil
}

func (f *familyDef) desc() *snapshot.Desc {
	k := snapshot.KindGauge
	if f.Kind == "counter" {
		k = snapshot.KindCounter
	}
	return &snapshot.Desc{Name: f.Name, Help: f.Help, Kind: k, Unit: f.Unit, OTelName: f.OTelName, OTelUnit: f.OTelUnit,
		LabelNames: f.Labels}
}

// validName reports whether s is a Prometheus metric name (colons allowed) or label name.
func validName(s string, metric bool) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		ok := c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' || metric && c == ':'
		if !ok {
			return false
		}
	}
	return true
}

// healthFamilyMin is the smallest encoded family entry (id, sample count); a sample has a
// value and, in counters, a start.
const (
	healthFamilyMin = 2
	valueSize       = 8
	startSize       = 8
)

// encodeHealth appends the binary form of snapshot s to dst; ids maps each family's Desc to
// its family id (all defined by the caller).
func encodeHealth(dst []byte, s *snapshot.Snapshot, ids map[*snapshot.Desc]uint64) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, unixNano(s.Time))
	strs := map[string]uint64{}
	var order []string
	for _, f := range s.Families {
		for _, x := range f.Samples {
			for _, v := range x.LabelValues {
				if _, ok := strs[v]; !ok {
					strs[v] = uint64(len(order))
					order = append(order, v)
				}
			}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, v := range order {
		dst = binary.AppendUvarint(dst, uint64(len(v)))
		dst = append(dst, v...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(s.Families)))
	for _, f := range s.Families {
		dst = binary.AppendUvarint(dst, ids[f.Desc])
		dst = binary.AppendUvarint(dst, uint64(len(f.Samples)))
		counter := f.Desc.Kind == snapshot.KindCounter
		for _, x := range f.Samples {
			for _, v := range x.LabelValues {
				dst = binary.AppendUvarint(dst, strs[v])
			}
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(x.Value))
			if counter {
				dst = binary.LittleEndian.AppendUint64(dst, unixNano(x.Start))
			}
		}
	}
	return dst
}

// checkSnapshot refuses a snapshot the format cannot hold: a sample whose label values do
// not match its family's label names.
func checkSnapshot(s *snapshot.Snapshot) error {
	if s == nil {
		return errors.New("no snapshot")
	}
	for _, f := range s.Families {
		if f.Desc == nil {
			return errors.New("family without a description")
		}
		for _, x := range f.Samples {
			if len(x.LabelValues) != len(f.Desc.LabelNames) {
				return fmt.Errorf("family %s: a sample has %d label values for %d labels", f.Desc.Name, len(x.LabelValues), len(f.Desc.LabelNames))
			}
		}
	}
	return nil
}

// decodeHealth decodes a health payload; families maps family ids to their descriptions.
func decodeHealth(p []byte, families map[uint64]*snapshot.Desc) (*snapshot.Snapshot, error) {
	d := &decoder{b: p}
	s := &snapshot.Snapshot{Time: fromUnixNano(d.u64())}
	ns := d.uvarint("string count")
	if d.err == nil && ns > uint64(len(d.b)) {
		d.fail("string count %d exceeds payload", ns)
	}
	if d.err != nil {
		return nil, d.err
	}
	strs := make([]string, ns)
	for i := range strs {
		strs[i] = d.str("label value")
	}
	nf := d.uvarint("family count")
	if d.err == nil && nf > uint64(len(d.b))/healthFamilyMin {
		d.fail("family count %d exceeds payload", nf)
	}
	if d.err != nil {
		return nil, d.err
	}
	s.Families = make([]snapshot.Family, 0, nf)
	for range nf {
		id := d.uvarint("family id")
		n := d.uvarint("sample count")
		if d.err != nil {
			return nil, d.err
		}
		desc, ok := families[id]
		if !ok {
			return nil, fmt.Errorf("health frame refers to unknown family %d", id)
		}
		nl := len(desc.LabelNames)
		counter := desc.Kind == snapshot.KindCounter
		size := nl + valueSize
		if counter {
			size += startSize
		}
		if n > uint64(len(d.b))/uint64(size) {
			return nil, fmt.Errorf("family %s: %d samples exceed the %d remaining bytes", desc.Name, n, len(d.b))
		}
		f := snapshot.Family{Desc: desc, Samples: make([]snapshot.Sample, n)}
		for i := range f.Samples {
			x := &f.Samples[i]
			if nl > 0 {
				x.LabelValues = make([]string, nl)
			}
			for j := range x.LabelValues {
				k := d.uvarint("label value index")
				if d.err == nil && k >= uint64(len(strs)) {
					return nil, fmt.Errorf("family %s: label value index %d out of range", desc.Name, k)
				}
				if d.err != nil {
					return nil, d.err
				}
				x.LabelValues[j] = strs[k]
			}
			x.Value = math.Float64frombits(d.u64())
			if counter {
				x.Start = fromUnixNano(d.u64())
			}
			if d.err != nil {
				return nil, d.err
			}
		}
		s.Families = append(s.Families, f)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return s, d.err
}

// unixNano is t in ns since the epoch, 0 for the zero time (or one before the epoch).
func unixNano(t time.Time) uint64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixNano())
}

// fromUnixNano is the inverse of unixNano: 0 is the zero time.
func fromUnixNano(ns uint64) time.Time {
	if ns == 0 || ns > math.MaxInt64 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns))
}

// decodeFamily decodes a family frame's payload.
func decodeFamily(p []byte) (uint64, *snapshot.Desc, error) {
	var f familyDef
	if err := json.Unmarshal(p, &f); err != nil {
		return 0, nil, err
	}
	if err := f.check(); err != nil {
		return 0, nil, err
	}
	return f.ID, f.desc(), nil
}
