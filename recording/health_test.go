package recording

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

func dumpSnapshot(s *snapshot.Snapshot) string {
	if s == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "@%d", unixNano(s.Time))
	for _, f := range s.Families {
		fmt.Fprintf(&b, " %+v{", *f.Desc)
		for _, x := range f.Samples {
			fmt.Fprintf(&b, "%q=%v/%d ", x.LabelValues, x.Value, unixNano(x.Start))
		}
		b.WriteString("}")
	}
	return b.String()
}

func sameSnapshot(a, b *snapshot.Snapshot) bool { return dumpSnapshot(a) == dumpSnapshot(b) }

// TestHealthReplayLoop: replayed health snapshots are shifted into the present on every
// pass; counters keep increasing across passes with the start time of the first pass, and
// gauges repeat their recorded values.
func TestHealthReplayLoop(t *testing.T) {
	var got []*snapshot.Snapshot
	r, err := FromBytes(sampleRecording(t, true), WithSpeed(0), WithLoop(true), WithHealthSink(func(s *snapshot.Snapshot) { got = append(got, s) }))
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Summary().HealthSnapshots; n != 2 {
		t.Fatalf("summary: %d health snapshots, want 2", n)
	}
	now := time.Unix(0, int64(t0)+3600e9) // replayed an hour after it was recorded
	r.nowFunc = func() time.Time { return now }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Run(ctx, func(pmdata.Batch) {
		if len(got) >= 6 {
			cancel()
		}
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	if len(got) < 6 {
		t.Fatalf("%d snapshots, want 6", len(got))
	}
	// First frame (t0) is now; the first health frame was 2 ms later.
	if want := now.Add(2 * time.Millisecond); !got[0].Time.Equal(want) {
		t.Errorf("first snapshot at %v, want %v", got[0].Time, want)
	}
	wantStart := testHealthT0.Add(3600 * time.Second)
	for i, s := range got[:6] {
		if i > 0 && !s.Time.After(got[i-1].Time) {
			t.Errorf("snapshot %d at %v, not after %v", i, s.Time, got[i-1].Time)
		}
		if p := s.Families[1].Samples[0].Value; p != 123.5 {
			t.Errorf("snapshot %d: power %v, want the recorded 123.5", i, p)
		}
		// Each pass records 1000 then 1010 J; the next pass starts where the previous ended.
		e := s.Families[2].Samples[0]
		if want := 1000 + 10*float64((i+1)/2); e.Value != want {
			t.Errorf("snapshot %d: energy %v, want %v (continuing across passes, never down)", i, e.Value, want)
		}
		if !e.Start.Equal(wantStart) {
			t.Errorf("snapshot %d: energy start %v, want %v (the first pass's)", i, e.Start, wantStart)
		}
		if !s.Families[0].Samples[0].Start.IsZero() {
			t.Errorf("snapshot %d: a gauge got a start time", i)
		}
	}
}

// TestHealthRejects: health frames and family definitions that do not add up are
// corruption, and the writer refuses what the format cannot hold.
func TestHealthRejects(t *testing.T) {
	fams := map[uint64]*snapshot.Desc{1: testPowerDesc, 2: testInfoDesc}
	good := encodeHealth(nil, &snapshot.Snapshot{Time: time.Unix(0, int64(t0)), Families: []snapshot.Family{
		{Desc: testPowerDesc, Samples: []snapshot.Sample{{LabelValues: []string{"0", "GPU-0"}, Value: 1}}},
	}}, map[*snapshot.Desc]uint64{testPowerDesc: 1})
	if s, err := decodeHealth(good, fams); err != nil || s.Families[0].Samples[0].LabelValues[1] != "GPU-0" {
		t.Fatalf("good payload: %v %v", s, err)
	}
	if _, err := decodeHealth(good, map[uint64]*snapshot.Desc{}); err == nil || !strings.Contains(err.Error(), "unknown family 1") {
		t.Errorf("unknown family: %v", err)
	}
	if _, err := decodeHealth(append(bytes.Clone(good), 0), fams); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("trailing byte: %v", err)
	}
	// Label index out of range: the last label index of the only sample (two strings).
	bad := bytes.Clone(good)
	bad[len(bad)-9] = 9
	if _, err := decodeHealth(bad, fams); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("label index out of range: %v", err)
	}
	hdr := binary.LittleEndian.AppendUint64(nil, t0)
	for name, p := range map[string][]byte{
		"string count":  binary.AppendUvarint(bytes.Clone(hdr), 1<<40),
		"family count":  binary.AppendUvarint(binary.AppendUvarint(bytes.Clone(hdr), 0), 1<<40),
		"sample count":  binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(binary.AppendUvarint(bytes.Clone(hdr), 0), 1), 2), 1<<40),
		"short payload": hdr[:5],
	} {
		if _, err := decodeHealth(p, fams); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, def := range []string{
		`{"id":1,"name":"bad name","kind":"gauge"}`,
		`{"id":1,"name":"x","kind":"histogram"}`,
		`{"id":1,"name":"x","kind":"gauge","labels":["a","a"]}`,
		`{"id":1,"name":"x","kind":"gauge","labels":["__name__"]}`,
		`{"id":1,"name":"x","kind":"gauge","labels":["1a"]}`,
		`not json`,
	} {
		if _, _, err := decodeFamily([]byte(def)); err == nil {
			t.Errorf("family %s accepted", def)
		}
	}
	// Version 3 files have no family or health frames.
	rd := &Reader{version: 3, header: Header{Version: 3}, fams: fams}
	for _, ft := range []FrameType{FrameFamily, FrameHealth} {
		ev := Event{Type: ft}
		if err := rd.decode(&ev, good); err == nil || !strings.Contains(err.Error(), "version-3") {
			t.Errorf("%s frame in a version-3 file: %v", ft, err)
		}
	}
	// A family defined twice is corruption.
	rd = &Reader{version: 4, header: Header{Version: 4}, fams: map[uint64]*snapshot.Desc{}}
	def := []byte(`{"id":1,"name":"x","kind":"gauge"}`)
	ev := Event{Type: FrameFamily}
	if err := rd.decode(&ev, def); err != nil {
		t.Fatal(err)
	}
	if err := rd.decode(&ev, def); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("family defined twice: %v", err)
	}

	w, err := NewWriter(&bytes.Buffer{}, Header{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	hist := &snapshot.Desc{Name: "h_seconds", Kind: snapshot.KindHistogram}
	for name, s := range map[string]*snapshot.Snapshot{
		"histogram":      {Families: []snapshot.Family{{Desc: hist, Samples: []snapshot.Sample{{}}}}},
		"label mismatch": {Families: []snapshot.Family{{Desc: testPowerDesc, Samples: []snapshot.Sample{{LabelValues: []string{"0"}}}}}},
		"bad name":       {Families: []snapshot.Family{{Desc: &snapshot.Desc{Name: "a-b"}}}},
		"nil":            nil,
	} {
		if err := w.WriteHealth(t0, s); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

// TestHealthValuesRoundTrip: special values and empty label values survive.
func TestHealthValuesRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	in := &snapshot.Snapshot{Time: time.Unix(0, int64(t0)), Families: []snapshot.Family{{Desc: testPowerDesc, Samples: []snapshot.Sample{
		{LabelValues: []string{"", "GPU-0"}, Value: math.Inf(1)}, {LabelValues: []string{"1", ""}, Value: -0.5},
	}}, {Desc: testEnergyDesc}}}
	for _, err := range []error{w.WriteDevices(t0, testDevices), w.WriteHealth(t0, in), w.WriteHealth(t0+1, in), w.Close(t0 + 2)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	evs, _, err := readAll(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || !sameSnapshot(evs[1].Health, in) || !sameSnapshot(evs[2].Health, in) {
		t.Fatalf("got %d events; %s\nwant %s", len(evs), dumpSnapshot(evs[1].Health), dumpSnapshot(in))
	}
	if n := bytes.Count(buf.Bytes(), []byte(`"name":"cupti_gpu_power_watts"`)); n != 1 {
		t.Errorf("the family was defined %d times, want once", n)
	}
}

// TestVersion3FileReads: a file of the previous version (coverage, no health) still replays.
func TestVersion3FileReads(t *testing.T) {
	var buf bytes.Buffer
	w := &Writer{w: bufio.NewWriter(&buf), sets: map[string]uint64{}, fams: map[string]uint64{}}
	if _, err := w.w.Write([]byte(Magic + "\x03\x00\x00\x00")); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		w.writeJSON(FrameHeader, t0, Header{Version: 3, Producer: "v3"}),
		w.WriteDevices(t0, testDevices),
		w.WriteHello(t0, ProcessEvent{Conn: 1, Process: &record.Process{PID: 1}}),
		w.WriteCoverage(t0+1e6, CoverageBatch{Conn: 1, Spans: []record.Interval{{Start: t0, End: t0 + 5}}}),
		w.Close(t0 + 2e6),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	sink := &countSink{}
	health := 0
	r, err := FromBytes(buf.Bytes(), WithSpeed(0), WithActivitySink(sink), WithHealthSink(func(*snapshot.Snapshot) { health++ }))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), func(pmdata.Batch) {}); err != nil {
		t.Fatal(err)
	}
	if r.Summary().Header.Version != 3 || sink.spans != 1 || health != 0 || r.Summary().HealthSnapshots != 0 {
		t.Errorf("version-3 file: header %+v spans %d health %d", r.Summary().Header, sink.spans, health)
	}
}
