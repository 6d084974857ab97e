package recording

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

const t0 = uint64(1795299125930175064)

var testSpans = []record.Interval{{Start: t0 + 2e6, End: t0 + 25e5}, {Start: t0 + 25e5, End: t0 + 3e6, Lossy: true}}

var (
	testMetrics = []string{"sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "pcie__read_bytes.sum"}
	testDevices = []pmdata.Device{{Index: 0, UUID: "GPU-0", Model: "NVIDIA H200", Chip: "GH100", PCIBusID: "0000:19:00.0"}}
	testCatalog = []pmdata.CatalogEntry{
		{Name: testMetrics[0], Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "sm", DimUnit: "gpc_cycle"}},
		{Name: testMetrics[1], Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"}},
	}
)

var (
	testPowerDesc  = &snapshot.Desc{Name: "cupti_gpu_power_watts", Kind: snapshot.KindGauge, Unit: "watts", OTelName: "hw.power", OTelUnit: "W", Help: "Power draw.", LabelNames: []string{"gpu", "uuid"}}
	testEnergyDesc = &snapshot.Desc{Name: "cupti_gpu_energy_joules_total", Kind: snapshot.KindCounter, Unit: "joules", Help: "Energy.", LabelNames: []string{"gpu", "uuid"}}
	testInfoDesc   = &snapshot.Desc{Name: "cupti_health_collection_seconds", Kind: snapshot.KindGauge}
	testHealthT0   = time.Unix(0, int64(t0)-5e9)
)

// testHealth is a health snapshot at time t with energy e joules on GPU 0.
func testHealth(t uint64, e float64) *snapshot.Snapshot {
	return &snapshot.Snapshot{Time: time.Unix(0, int64(t)), Families: []snapshot.Family{
		{Desc: testInfoDesc, Samples: []snapshot.Sample{{Value: 0.001}}},
		{Desc: testPowerDesc, Samples: []snapshot.Sample{{LabelValues: []string{"0", "GPU-0"}, Value: 123.5}}},
		{Desc: testEnergyDesc, Samples: []snapshot.Sample{{LabelValues: []string{"0", "GPU-0"}, Value: e, Start: testHealthT0}}},
	}}
}

// sampleRecording writes a small recording: header, devices, catalog, two batches, two
// health snapshots, a process with one activity batch, and (if closed) the end frame.
func sampleRecording(t testing.TB, closed bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Producer: "test", Synthetic: true, IntervalNS: 1e6}, t0)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteDevices(t0, testDevices))
	must(w.WriteCatalog(t0, testCatalog))
	must(w.WriteBatch(t0+2e6, pmdata.Batch{Device: 0, Metrics: testMetrics, DroppedFirst: 1, Samples: []pmdata.Sample{
		{Start: t0, End: t0 + 1e6, Values: []float64{50, 1000}},
		{Start: t0 + 1e6, End: t0 + 2e6, Values: []float64{math.NaN(), 2000}},
	}}))
	must(w.WriteHealth(t0+2e6, testHealth(t0+2e6, 1000)))
	must(w.WriteHello(t0+2e6, ProcessEvent{Conn: 7, Process: &record.Process{PID: 42, Executable: "python3", DeviceUUIDs: []string{"GPU-0"}}}))
	must(w.WriteActivity(t0+3e6, ActivityBatch{Conn: 7, Dropped: 3, Records: []record.Record{
		{Kind: record.KindKernel, Start: t0 + 2e6, End: t0 + 25e5, Name: "_Z4gemmv"},
		{Kind: record.KindMemcpy, Start: t0 + 25e5, End: t0 + 3e6, Bytes: 1 << 20, CopyKind: 1, SrcKind: 2, DstKind: 3},
		{Kind: record.KindKernel, Start: t0 + 26e5, End: t0 + 27e5, Name: "_Z4gemmv"},
		{Kind: record.KindMemcpy, Device: 1, Start: t0 + 27e5, End: t0 + 28e5, Bytes: 1 << 21, CopyKind: 10, SrcKind: 3, DstKind: 3, SrcDevice: 3},
	}}))
	must(w.WriteCoverage(t0+3e6, CoverageBatch{Conn: 7, Spans: testSpans}))
	must(w.WriteBatch(t0+4e6, pmdata.Batch{Device: 0, Metrics: testMetrics, Overflows: 1, Samples: []pmdata.Sample{
		{Start: t0 + 3e6, End: t0 + 4e6, Values: []float64{75, 4000}},
	}}))
	must(w.WriteHealth(t0+4e6, testHealth(t0+4e6, 1010)))
	must(w.WriteGoodbye(t0+4e6, 7))
	if closed {
		must(w.Close(t0 + 5e6))
	} else {
		must(w.Flush())
	}
	return buf.Bytes()
}

func readAll(data []byte) ([]Event, *Reader, error) {
	rd, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil, err
	}
	var evs []Event
	for ev := range rd.Events() {
		evs = append(evs, ev)
	}
	return evs, rd, rd.Err()
}

func TestRoundTrip(t *testing.T) {
	evs, rd, err := readAll(sampleRecording(t, true))
	if err != nil {
		t.Fatal(err)
	}
	if !rd.Ended() || !rd.Header().Synthetic || rd.Header().Version != Version {
		t.Fatalf("header %+v ended %v", rd.Header(), rd.Ended())
	}
	var types []FrameType
	for _, e := range evs {
		types = append(types, e.Type)
	}
	want := []FrameType{FrameDevices, FrameCatalog, FrameBatch, FrameHealth, FrameHello, FrameActivity, FrameCoverage, FrameBatch, FrameHealth, FrameGoodbye, FrameEnd}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	if !reflect.DeepEqual(evs[0].Devices, testDevices) || !reflect.DeepEqual(evs[1].Catalog, testCatalog) {
		t.Fatalf("devices/catalog differ: %+v %+v", evs[0].Devices, evs[1].Catalog)
	}
	b := evs[2].Batch
	if b.DroppedFirst != 1 || len(b.Samples) != 2 || b.Samples[0].Values[1] != 1000 || !math.IsNaN(b.Samples[1].Values[0]) {
		t.Fatalf("batch %+v", b)
	}
	if &evs[2].Batch.Metrics[0] != &evs[7].Batch.Metrics[0] {
		t.Error("batches of one metric set should share the Metrics slice")
	}
	if evs[7].Batch.Overflows != 1 {
		t.Errorf("overflows %d", evs[7].Batch.Overflows)
	}
	if c := evs[6].Coverage; c.Conn != 7 || !reflect.DeepEqual(c.Spans, testSpans) {
		t.Errorf("coverage %+v, want conn 7 %+v", c, testSpans)
	}
	for i, e := range map[int]float64{3: 1000, 8: 1010} {
		if got, want := evs[i].Health, testHealth(t0+uint64(i/8+1)*2e6, e); !sameSnapshot(got, want) {
			t.Errorf("health frame %d:\n got %s\nwant %s", i, dumpSnapshot(got), dumpSnapshot(want))
		}
	}
	if evs[3].Health.Families[1].Desc != evs[8].Health.Families[1].Desc {
		t.Error("health frames should share the family descriptions")
	}
	a := evs[5].Activity
	if a.Conn != 7 || a.Dropped != 3 || len(a.Records) != 4 || a.Records[2].Name != "_Z4gemmv" || a.Records[1].Bytes != 1<<20 || a.Records[1].Name != "" ||
		a.Records[3].SrcDevice != 3 || a.Records[3].Device != 1 || a.Records[3].CopyKind != 10 {
		t.Fatalf("activity %+v", a)
	}
	if evs[4].Process.Process.PID != 42 || evs[9].Process.Conn != 7 {
		t.Fatalf("process events %+v %+v", evs[4].Process, evs[9].Process)
	}
}

// Every prefix of a recording either ends cleanly at a frame boundary or reports the
// offset of the frame that was cut.
func TestTruncatedAtEveryByte(t *testing.T) {
	data := sampleRecording(t, true)
	boundaries := map[int]bool{}
	for off := fileHeaderSize; off < len(data); {
		off += frameHeaderSize + int(binary.LittleEndian.Uint32(data[off+1:])) + frameTrailer
		if off > fileHeaderSize+frameHeaderSize { // after the header frame
			boundaries[off] = true
		}
	}
	for n := 0; n < len(data); n++ {
		_, rd, err := readAll(data[:n])
		if boundaries[n] {
			if err != nil {
				t.Fatalf("prefix %d at a frame boundary: %v", n, err)
			}
			if rd.Ended() {
				t.Fatalf("prefix %d claims to be complete", n)
			}
			continue
		}
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix %d: err %v, want truncated", n, err)
		}
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Offset > int64(n) || !strings.Contains(err.Error(), "truncated at byte") {
			t.Fatalf("prefix %d: %v", n, err)
		}
	}
}

func TestCorruptionDetected(t *testing.T) {
	data := sampleRecording(t, true)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x20
		_, _, err := readAll(bad)
		if err == nil {
			t.Fatalf("flipping byte %d went unnoticed", i)
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("byte %d: unexpected error %v", i, err)
		}
	}
}

func TestNotARecording(t *testing.T) {
	for _, in := range []string{"", "hello world, this is text", "CUPTIREC\x03\x00\x00\x00", "CUPTIREC\x00\x00\x00\x00"} {
		_, _, err := readAll([]byte(in))
		if err == nil {
			t.Fatalf("%q accepted", in)
		}
		t.Logf("%q: %v", in, err)
	}
}

// TestVersion1Activity: version-1 activity payloads (no src_device) still decode, and
// reading them as version 2 fails instead of shifting fields.
func TestVersion1Activity(t *testing.T) {
	p := []byte{7, 0, 0, 1, byte(record.KindMemcpy)} // conn 7, dropped 0, no names, 1 record
	p = binary.LittleEndian.AppendUint32(p, 1)       // device
	p = binary.LittleEndian.AppendUint32(p, 2)       // stream
	p = binary.LittleEndian.AppendUint64(p, 3)       // start
	p = binary.LittleEndian.AppendUint64(p, 4)       // end
	p = binary.LittleEndian.AppendUint64(p, 5)       // bytes
	p = append(p, 10, 3, 3, 0, 0)                    // copy, src, dst, memory kind, name index
	a, err := decodeActivity(p, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := record.Record{Kind: record.KindMemcpy, Device: 1, Stream: 2, Start: 3, End: 4, Bytes: 5, CopyKind: 10, SrcKind: 3, DstKind: 3}
	if a.Conn != 7 || len(a.Records) != 1 || a.Records[0] != want {
		t.Fatalf("version 1: %+v, want %+v", a, want)
	}
	if _, err := decodeActivity(p, 2); err == nil {
		t.Error("a version-1 payload decoded as version 2")
	}
}

type sinkLog struct {
	events []string
	spans  []record.Interval
}

func (s *sinkLog) Connect(c uint64, p record.Process) { s.events = append(s.events, "connect") }
func (s *sinkLog) Add(c uint64, d uint64, r []record.Record) {
	s.events = append(s.events, "add")
}
func (s *sinkLog) Coverage(c uint64, spans []record.Interval) {
	s.events = append(s.events, "coverage")
	s.spans = append(s.spans, spans...)
}
func (s *sinkLog) Disconnect(c uint64) { s.events = append(s.events, "disconnect") }

func TestReplayLoopShiftsTimestamps(t *testing.T) {
	data := sampleRecording(t, false) // no end frame: still replayable
	sink := &sinkLog{}
	r, err := FromBytes(data, WithSpeed(0), WithLoop(true), WithActivitySink(sink))
	if err != nil {
		t.Fatal(err)
	}
	if s := r.Summary(); s.Complete || s.Batches != 2 || s.Samples != 3 || s.ActivityRecords != 4 || s.First != t0 {
		t.Fatalf("summary %+v", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var starts []uint64
	err = r.Run(ctx, func(b pmdata.Batch) {
		for _, s := range b.Samples {
			starts = append(starts, s.Start)
		}
		if len(starts) >= 9 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v", err)
	}
	for i := 1; i < len(starts); i++ {
		if starts[i] <= starts[i-1] {
			t.Fatalf("timestamps do not increase across loops: %v", starts)
		}
	}
	if len(sink.events) < 8 || !reflect.DeepEqual(sink.events[:4], []string{"connect", "add", "coverage", "disconnect"}) {
		t.Fatalf("activity events %v", sink.events)
	}
	// Spans are shifted like every other timestamp: increasing across passes.
	for i := 1; i < len(sink.spans); i++ {
		if sink.spans[i].Start < sink.spans[i-1].End || sink.spans[i].End <= sink.spans[i].Start {
			t.Fatalf("spans not shifted into increasing order: %+v", sink.spans)
		}
	}
	if len(sink.spans) < 4 || sink.spans[0].End-sink.spans[0].Start != testSpans[0].End-testSpans[0].Start || !sink.spans[1].Lossy {
		t.Fatalf("replayed spans %+v", sink.spans)
	}
}

func TestReplayEndsWithoutLoop(t *testing.T) {
	r, err := FromBytes(sampleRecording(t, true), WithSpeed(1000))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := r.Run(context.Background(), func(b pmdata.Batch) { n++ }); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d batches, want 2", n)
	}
}

// TestReplayTruncatedAtEveryByte: a recording whose writer was killed (cut at any byte)
// replays every whole frame before the cut, and reports where it was cut; only a file
// cut before its devices frame is refused.
func TestReplayTruncatedAtEveryByte(t *testing.T) {
	data := sampleRecording(t, true)
	rd, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	var evs []Event
	var ends []int // end offset of each event's frame
	for ev := range rd.Events() {
		evs = append(evs, ev)
		ends = append(ends, int(rd.Offset()))
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	boundary := map[int]bool{} // every frame's end, metric-set frames included
	for off := fileHeaderSize; off < len(data); {
		off += frameHeaderSize + int(binary.LittleEndian.Uint32(data[off+1:])) + frameTrailer
		boundary[off] = true
	}
	for n := 0; n <= len(data); n++ {
		whole := 0
		for whole < len(ends) && ends[whole] <= n {
			whole++
		}
		var wantBatches, wantRecords, wantSpans, wantHealth int
		for _, ev := range evs[:whole] {
			switch ev.Type {
			case FrameBatch:
				wantBatches++
			case FrameActivity:
				wantRecords += len(ev.Activity.Records)
			case FrameCoverage:
				wantSpans += len(ev.Coverage.Spans)
			case FrameHealth:
				wantHealth++
			}
		}
		sink := &countSink{}
		health := 0
		r, err := FromBytes(data[:n], WithSpeed(0), WithActivitySink(sink), WithHealthSink(func(*snapshot.Snapshot) { health++ }))
		if whole == 0 { // no devices frame yet: nothing to serve
			if err == nil {
				t.Fatalf("prefix %d: accepted without a devices frame", n)
			}
			continue
		}
		if err != nil {
			t.Fatalf("prefix %d (%d whole frames): %v", n, whole, err)
		}
		cut := !boundary[n]
		if s := r.Summary(); (s.Truncated > 0) != cut || (cut && (s.Truncated < int64(ends[whole-1]) || s.Truncated >= int64(n))) {
			t.Fatalf("prefix %d: summary truncated at %d, want a cut frame after %d: %v", n, s.Truncated, ends[whole-1], cut)
		}
		batches := 0
		if err := r.Run(context.Background(), func(pmdata.Batch) { batches++ }); err != nil {
			t.Fatalf("prefix %d: replay: %v", n, err)
		}
		if batches != wantBatches || sink.records != wantRecords || sink.spans != wantSpans || health != wantHealth {
			t.Fatalf("prefix %d: replayed %d batches %d records %d spans %d health, want %d %d %d %d", n, batches, sink.records, sink.spans,
				health, wantBatches, wantRecords, wantSpans, wantHealth)
		}
	}
}

type countSink struct{ records, spans int }

func (s *countSink) Connect(uint64, record.Process)             {}
func (s *countSink) Add(_ uint64, _ uint64, r []record.Record)  { s.records += len(r) }
func (s *countSink) Coverage(_ uint64, spans []record.Interval) { s.spans += len(spans) }
func (s *countSink) Disconnect(uint64)                          {}

// TestCoverageRejects: spans that are empty, reversed, out of order or flagged with
// unknown bits are corruption, as is a coverage frame in a version-2 file.
func TestCoverageRejects(t *testing.T) {
	for _, c := range []struct {
		name  string
		spans []record.Interval
		want  string
	}{
		{"empty", []record.Interval{{Start: 5, End: 5}}, "end 5 <= start 5"},
		{"reversed", []record.Interval{{Start: 9, End: 3}}, "end 3 <= start 9"},
		{"overlap", []record.Interval{{Start: 1, End: 10}, {Start: 5, End: 20}}, "before the previous span ends"},
	} {
		if _, err := decodeCoverage(encodeCoverage(nil, &CoverageBatch{Conn: 1, Spans: c.spans})); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	p := encodeCoverage(nil, &CoverageBatch{Conn: 1, Spans: []record.Interval{{Start: 1, End: 2}}})
	p[len(p)-1] = 2
	if _, err := decodeCoverage(p); err == nil || !strings.Contains(err.Error(), "unknown flags") {
		t.Errorf("unknown flags: %v", err)
	}
	if _, err := decodeCoverage(append(encodeCoverage(nil, &CoverageBatch{Conn: 1}), 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	huge := binary.AppendUvarint(binary.AppendUvarint(nil, 1), 1<<40)
	if _, err := decodeCoverage(huge); err == nil {
		t.Error("span count beyond the payload accepted")
	}
	rd := &Reader{version: 2, header: Header{Version: 2}}
	ev := Event{Type: FrameCoverage}
	if err := rd.decode(&ev, encodeCoverage(nil, &CoverageBatch{Conn: 1})); err == nil || !strings.Contains(err.Error(), "version-2") {
		t.Errorf("coverage in a version-2 file: %v", err)
	}
}

// TestVersion2FileReads: a file of the previous version (no coverage frames) still replays.
func TestVersion2FileReads(t *testing.T) {
	var buf bytes.Buffer
	w := &Writer{w: bufio.NewWriter(&buf), sets: map[string]uint64{}}
	fh := []byte(Magic + "\x02\x00\x00\x00")
	if _, err := w.w.Write(fh); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.writeJSON(FrameHeader, t0, Header{Version: 2, Producer: "v2"}))
	must(w.WriteDevices(t0, testDevices))
	must(w.WriteActivity(t0+1e6, ActivityBatch{Conn: 1, Records: []record.Record{{Kind: record.KindMemcpy, Start: t0, End: t0 + 5, SrcDevice: 1, CopyKind: 10}}}))
	must(w.Close(t0 + 2e6))
	sink := &countSink{}
	r, err := FromBytes(buf.Bytes(), WithSpeed(0), WithActivitySink(sink))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), func(pmdata.Batch) {}); err != nil {
		t.Fatal(err)
	}
	if r.Summary().Header.Version != 2 || sink.records != 1 || sink.spans != 0 {
		t.Errorf("version-2 file: header %+v records %d spans %d", r.Summary().Header, sink.records, sink.spans)
	}
}
