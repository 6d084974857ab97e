package activity

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// fakeClock is a settable clock for withClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }
func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func family(t *testing.T, s *snapshot.Snapshot, name string) snapshot.Family {
	t.Helper()
	for _, f := range s.Families {
		if f.Desc.Name == name {
			return f
		}
	}
	t.Fatalf("no family %s", name)
	return snapshot.Family{}
}

// sample returns the sample with exactly these label values, or nil.
func sample(t *testing.T, s *snapshot.Snapshot, name string, labels ...string) *snapshot.Sample {
	t.Helper()
	f := family(t, s, name)
	for i := range f.Samples {
		if slices.Equal(f.Samples[i].LabelValues, labels) {
			return &f.Samples[i]
		}
	}
	return nil
}

func mustSample(t *testing.T, s *snapshot.Snapshot, name string, labels ...string) *snapshot.Sample {
	t.Helper()
	sm := sample(t, s, name, labels...)
	if sm == nil {
		t.Fatalf("%s%q: no series; family has %v", name, labels, labelSets(family(t, s, name)))
	}
	return sm
}

func labelSets(f snapshot.Family) [][]string {
	var out [][]string
	for _, s := range f.Samples {
		out = append(out, s.LabelValues)
	}
	return out
}

func kernel(dev uint32, name string, ns uint64) record.Record {
	return record.Record{Kind: record.KindKernel, Device: dev, Start: 1000, End: 1000 + ns, Name: name}
}

func testProcess(pid uint32) *record.Process {
	return &record.Process{PID: pid, StartTime: 42, DeviceUUIDs: []string{"GPU-aaaa", "GPU-bbbb"},
		Pod: "trainer-0", Namespace: "ml", Container: "main"}
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestAggregatorKernels(t *testing.T) {
	a := NewAggregator(withFullSplit(), WithGPUResolver(func(uuid string) (string, bool) {
		return "3", uuid == "GPU-aaaa" // host index of GPU-aaaa; GPU-bbbb unknown
	}))
	p := testProcess(100)
	a.Connect(p)
	a.Add(p, []record.Record{
		kernel(0, "_Z4busyPfii", 1_000),     // 1 us
		kernel(0, "_Z4busyPfii", 3_000),     // 3 us
		kernel(0, "_Z4busyPfii", 2_000_000), // 2 ms
		kernel(1, "_ZN3foo3barEv", 10_000),  // 10 us, ordinal 1: gpu label falls back to "1"
		kernel(7, "_Z4busyPfii", 5_000),     // ordinal beyond the hello: refused, no series
	})
	s := a.Snapshot()

	busy := mustSample(t, s, "cupti_kernel_duration_seconds", "3", "GPU-aaaa", "ml", "trainer-0", "main", "busy").Histogram
	if busy.Count != 3 || !approx(busy.Sum, 2.004e-3) {
		t.Errorf("busy count/sum = %d/%g, want 3/0.002004", busy.Count, busy.Sum)
	}
	wantCum := map[float64]uint64{1e-6: 1, 2.5e-6: 1, 5e-6: 2, 1e-3: 2, 2.5e-3: 3, 10: 3}
	for i, b := range busy.Bounds {
		if w, ok := wantCum[b]; ok && busy.Cumulative[i] != w {
			t.Errorf("busy bucket le=%g: %d, want %d", b, busy.Cumulative[i], w)
		}
	}
	if !busy.Native || busy.Schema != 3 {
		t.Errorf("native=%v schema=%d, want native schema 3", busy.Native, busy.Schema)
	}
	if h := mustSample(t, s, "cupti_kernel_duration_seconds", "1", "GPU-bbbb", "ml", "trainer-0", "main", "foo::bar").Histogram; h.Count != 1 || !approx(h.Sum, 1e-5) {
		t.Errorf("foo::bar count/sum = %d/%g", h.Count, h.Sum)
	}
	for _, sm := range family(t, s, "cupti_kernel_duration_seconds").Samples {
		if sm.LabelValues[0] == "7" {
			t.Errorf("ordinal 7, not in the hello, made a series %q", sm.LabelValues)
		}
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_device").Value; v != 1 {
		t.Errorf("unknown_device drops = %g, want 1", v)
	}

	gs := mustSample(t, s, "cupti_kernel_gpu_seconds_total", "3", "GPU-aaaa", "ml", "trainer-0", "main")
	if !approx(gs.Value, 2.004e-3) {
		t.Errorf("pod GPU seconds = %g, want 0.002004", gs.Value)
	}
	if h := mustSample(t, s, "cupti_pod_kernel_duration_seconds", "1", "GPU-bbbb", "ml", "trainer-0", "main").Histogram; h.Count != 1 {
		t.Errorf("pod histogram count %d, want 1", h.Count)
	}
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != 4 {
		t.Errorf("kernel records = %g, want 4", v)
	}
	if v := mustSample(t, s, "cupti_activity_records_total", "memcpy").Value; v != 0 {
		t.Errorf("memcpy records = %g, want 0", v)
	}
	if v := mustSample(t, s, "cupti_activity_processes").Value; v != 1 {
		t.Errorf("processes = %g, want 1", v)
	}
	if s2 := a.Snapshot(); s2 != s {
		t.Error("Snapshot rebuilt although nothing changed")
	}
	a.Disconnect(p)
	if v := mustSample(t, a.Snapshot(), "cupti_activity_processes").Value; v != 0 {
		t.Errorf("processes after disconnect = %g, want 0", v)
	}
}

func kernelNames(t *testing.T, s *snapshot.Snapshot) []string {
	var names []string
	for _, sm := range family(t, s, "cupti_kernel_duration_seconds").Samples {
		names = append(names, sm.LabelValues[5])
	}
	return names
}

func TestAggregatorTopKernels(t *testing.T) {
	clk := newFakeClock()
	a := NewAggregator(withFullSplit(), WithTopKernels(2), WithRerankInterval(time.Minute), withClock(clk.now))
	p := testProcess(1)
	// a and b take the two free places at once; c goes to "other".
	a.Add(p, []record.Record{kernel(0, "a", 1e9), kernel(0, "b", 1e8), kernel(0, "c", 1e6)})
	s := a.Snapshot()
	if got, want := kernelNames(t, s), []string{"a", "b", "other"}; !slices.Equal(got, want) {
		t.Fatalf("kernels = %v, want %v", got, want)
	}
	if h := mustSample(t, s, "cupti_kernel_duration_seconds", "0", "GPU-aaaa", "ml", "trainer-0", "main", "other").Histogram; h.Count != 1 || !approx(h.Sum, 1e-3) {
		t.Errorf("other count/sum = %d/%g, want 1/0.001", h.Count, h.Sum)
	}
	// c now uses 10 s: more than twice b's 0.1 s, so it replaces b at the next re-rank.
	a.Add(p, []record.Record{kernel(0, "c", 10e9)})
	clk.advance(time.Minute)
	a.Add(p, []record.Record{kernel(0, "b", 1e6), kernel(0, "c", 2e6)}) // re-ranks first, then aggregates
	s = a.Snapshot()
	if got, want := kernelNames(t, s), []string{"a", "c", "other"}; !slices.Equal(got, want) {
		t.Fatalf("kernels after re-rank = %v, want %v", got, want)
	}
	c := mustSample(t, s, "cupti_kernel_duration_seconds", "0", "GPU-aaaa", "ml", "trainer-0", "main", "c")
	if c.Histogram.Count != 1 || !c.Start.Equal(clk.now()) {
		t.Errorf("c: count %d start %v, want a new series (1 record, start %v)", c.Histogram.Count, c.Start, clk.now())
	}
	// other held c's first two records and now b's.
	if h := mustSample(t, s, "cupti_kernel_duration_seconds", "0", "GPU-aaaa", "ml", "trainer-0", "main", "other").Histogram; h.Count != 3 {
		t.Errorf("other count %d, want 3", h.Count)
	}
	// Hysteresis: b now uses 1.5x what a does in one interval; a's doubled score keeps it.
	clk.advance(time.Minute)
	a.Add(p, []record.Record{kernel(0, "a", 1e9), kernel(0, "b", 1.5e9), kernel(0, "c", 30e9)})
	clk.advance(time.Minute)
	a.Add(p, []record.Record{kernel(0, "a", 1)})
	if got, want := kernelNames(t, a.Snapshot()), []string{"a", "c", "other"}; !slices.Equal(got, want) {
		t.Errorf("kernels = %v, want %v (a kept by hysteresis)", got, want)
	}
}

func TestAggregatorMemcpyMemset(t *testing.T) {
	a := NewAggregator(withFullSplit())
	p := testProcess(1)
	a.Add(p, []record.Record{
		{Kind: record.KindMemcpy, CopyKind: 1, SrcKind: 1, DstKind: 3, Bytes: 1000, Start: 0, End: 2000},                       // HtoD pageable
		{Kind: record.KindMemcpy, CopyKind: 1, SrcKind: 1, DstKind: 3, Bytes: 3000, Start: 0, End: 4000},                       // HtoD pageable
		{Kind: record.KindMemcpy, CopyKind: 2, SrcKind: 3, DstKind: 2, Bytes: 500, Start: 0, End: 1000},                        // DtoH pinned
		{Kind: record.KindMemcpy, CopyKind: 8, SrcKind: 3, DstKind: 3, Bytes: 64, Start: 0, End: 100},                          // DtoD
		{Kind: record.KindMemcpy, CopyKind: 10, SrcKind: 3, DstKind: 3, Bytes: 32, Start: 0, End: 100, SrcDevice: 1},           // PtoP 1 -> 0
		{Kind: record.KindMemcpy, CopyKind: 10, SrcKind: 3, DstKind: 3, Bytes: 16, Start: 0, End: 100, SrcDevice: 1},           // PtoP 1 -> 0
		{Kind: record.KindMemcpy, CopyKind: 10, SrcKind: 3, DstKind: 3, Bytes: 8, Start: 0, End: 100, Device: 1},               // PtoP 0 -> 1
		{Kind: record.KindMemcpy, CopyKind: 10, SrcKind: 3, DstKind: 3, Bytes: 4, Start: 0, End: 100, Device: 1, SrcDevice: 9}, // PtoP ? -> 1
		{Kind: record.KindMemcpy, CopyKind: 1, SrcKind: 5, DstKind: 3, Bytes: 7, Start: 0, End: 100},                           // HtoD managed
		{Kind: record.KindMemcpy, CopyKind: 5, SrcKind: 4, DstKind: 4, Bytes: 9, Start: 0, End: 100},                           // AtoA -> other
		{Kind: record.KindMemset, MemoryKind: 3, Bytes: 4096, Start: 10, End: 1010, Device: 1},                                 // device
		{Kind: record.KindMemset, MemoryKind: 7, Bytes: 4, Start: 10, End: 5, Device: 1},                                       // managed static; end < start -> 0 s
		{Kind: 9, Start: 0, End: 1}, // unknown kind: dropped
	})
	s := a.Snapshot()
	for _, tc := range []struct {
		gpu, uuid, copyKind, host, src string
		bytes                          float64
		count                          uint64
		sum                            float64
	}{
		{"0", "GPU-aaaa", "HtoD", "pageable", "", 4000, 2, 6e-6},
		{"0", "GPU-aaaa", "DtoH", "pinned", "", 500, 1, 1e-6},
		{"0", "GPU-aaaa", "DtoD", "none", "", 64, 1, 1e-7},
		{"0", "GPU-aaaa", "PtoP", "none", "1", 48, 2, 2e-7},
		{"1", "GPU-bbbb", "PtoP", "none", "0", 8, 1, 1e-7},
		{"1", "GPU-bbbb", "PtoP", "none", "unknown", 4, 1, 1e-7},
		{"0", "GPU-aaaa", "HtoD", "managed", "", 7, 1, 1e-7},
		{"0", "GPU-aaaa", "other", "none", "", 9, 1, 1e-7},
	} {
		b := mustSample(t, s, "cupti_memcpy_bytes_total", tc.gpu, tc.uuid, "ml", "trainer-0", "main", tc.copyKind, tc.host, tc.src)
		h := mustSample(t, s, "cupti_memcpy_duration_seconds", tc.gpu, tc.uuid, "ml", "trainer-0", "main", tc.copyKind, tc.host, tc.src).Histogram
		if b.Value != tc.bytes || h.Count != tc.count || !approx(h.Sum, tc.sum) {
			t.Errorf("memcpy gpu %s %s/%s src %q: bytes %g count %d sum %g, want %g %d %g", tc.gpu, tc.copyKind, tc.host, tc.src, b.Value, h.Count, h.Sum, tc.bytes, tc.count, tc.sum)
		}
	}
	if n := len(family(t, s, "cupti_memcpy_bytes_total").Samples); n != 8 {
		t.Errorf("%d memcpy series, want 8", n)
	}
	if v := mustSample(t, s, "cupti_memset_bytes_total", "1", "GPU-bbbb", "ml", "trainer-0", "main", "device").Value; v != 4096 {
		t.Errorf("memset device bytes %g, want 4096", v)
	}
	h := mustSample(t, s, "cupti_memset_duration_seconds", "1", "GPU-bbbb", "ml", "trainer-0", "main", "managed").Histogram
	if h.Count != 1 || h.Sum != 0 || h.ZeroCount != 1 {
		t.Errorf("memset managed: count %d sum %g zero %d, want 1 0 1", h.Count, h.Sum, h.ZeroCount)
	}
	if v := mustSample(t, s, "cupti_activity_records_total", "memcpy").Value; v != 10 {
		t.Errorf("memcpy records %g, want 10", v)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "unknown_kind").Value; v != 1 {
		t.Errorf("unknown_kind drops %g, want 1", v)
	}
}

func TestAggregatorDrops(t *testing.T) {
	a := NewAggregator()
	p := testProcess(7)
	a.Connect(p)
	a.SenderDrops(p, map[string]uint64{"queue_full": 5})
	a.SenderDrops(p, map[string]uint64{"queue_full": 8, "cupti_dropped": 2})
	a.Disconnect(p)
	again := testProcess(7) // same pid and start time: a reconnect, counters continue
	a.Connect(again)
	a.SenderDrops(again, map[string]uint64{"queue_full": 8, "cupti_dropped": 2})
	a.SenderDrops(again, map[string]uint64{"queue_full": 10, "cupti_dropped": 1}) // a decrease is ignored
	other := testProcess(8)
	a.SenderDrops(other, map[string]uint64{"queue_full": 4})
	a.DroppedRecords("unknown_kind", 3)
	a.ConnectionAccepted()
	a.ConnectionAccepted()
	a.ConnectionDropped("malformed")
	s := a.Snapshot()
	for reason, want := range map[string]float64{"queue_full": 14, "cupti_dropped": 2, "unknown_kind": 3, "buffer_pool_exhausted": 0} {
		if v := mustSample(t, s, "cupti_activity_dropped_records_total", reason).Value; v != want {
			t.Errorf("dropped{reason=%q} = %g, want %g", reason, v, want)
		}
	}
	if v := mustSample(t, s, "cupti_activity_connections_total").Value; v != 2 {
		t.Errorf("connections = %g, want 2", v)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_connections_total", "malformed").Value; v != 1 {
		t.Errorf("malformed connections = %g, want 1", v)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_connections_total", "limit").Value; v != 0 {
		t.Errorf("limit connections = %g, want 0", v)
	}
}

func TestAggregatorRecordTap(t *testing.T) {
	var got []record.Record
	var gotP *record.Process
	a := NewAggregator(WithRecordTap(func(p *record.Process, recs []record.Record) {
		gotP = p
		got = append(got, recs...)
	}))
	p := testProcess(1)
	recs := []record.Record{kernel(0, "k", 5), {Kind: record.KindMemset, Bytes: 3}}
	a.Add(p, recs)
	if gotP != p || !slices.Equal(got, recs) {
		t.Errorf("tap got %v %v, want %v %v", gotP, got, p, recs)
	}
}

func TestAggregatorConcurrentSafe(t *testing.T) {
	a := NewAggregator(WithTopKernels(3), WithRerankInterval(time.Millisecond))
	const workers, batches, perBatch = 8, 50, 20
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() { // a scraper
		for {
			select {
			case <-done:
				return
			default:
				a.Snapshot()
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			p := testProcess(uint32(w))
			a.Connect(p)
			recs := make([]record.Record, perBatch)
			for b := range batches {
				for i := range recs {
					recs[i] = kernel(uint32(i%2), fmt.Sprintf("k%d", (b+i)%7), 1000)
				}
				a.Add(p, recs)
				a.SenderDrops(p, map[string]uint64{"queue_full": uint64(b)})
			}
			a.Disconnect(p)
		})
	}
	wg.Wait()
	close(done)
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_records_total", "kernel").Value; v != workers*batches*perBatch {
		t.Errorf("kernel records %g, want %d", v, workers*batches*perBatch)
	}
	var n uint64
	for _, sm := range family(t, s, "cupti_kernel_duration_seconds").Samples {
		n += sm.Histogram.Count
	}
	// Re-ranks drop demoted series, so the exported total is at most the records.
	if n == 0 || n > workers*batches*perBatch {
		t.Errorf("kernel histogram total %d, want 1..%d", n, workers*batches*perBatch)
	}
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "queue_full").Value; v != workers*(batches-1) {
		t.Errorf("queue_full %g, want %d", v, workers*(batches-1))
	}
	if v := mustSample(t, s, "cupti_activity_processes").Value; v != 0 {
		t.Errorf("processes %g, want 0", v)
	}
}

// withFullSplit splits every histogram by GPU and pod, as before the node-wide defaults.
func withFullSplit() Option {
	return func(c *config) {
		c.kernelSplit, c.copySplit = SplitGPU|SplitPod, SplitGPU|SplitPod
		c.buckets = FineBuckets
	}
}
