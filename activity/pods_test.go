package activity

import (
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// mapResolver answers from a table keyed by cgroup text; cgroups not in it are no pod.
type mapResolver struct {
	mu    sync.Mutex
	pods  map[string]Pod
	state map[string]PodState // default PodFound for cgroups in pods
	calls int
}

func (m *mapResolver) resolve(_ uint32, cgroup string) (Pod, PodState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	pod, ok := m.pods[cgroup]
	if st, set := m.state[cgroup]; set {
		return pod, st
	}
	if !ok {
		return Pod{}, PodNotFound
	}
	return pod, PodFound
}

func (m *mapResolver) set(cgroup string, pod Pod, st PodState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[cgroup], m.state[cgroup] = pod, st
}

func newMapResolver() *mapResolver {
	return &mapResolver{pods: map[string]Pod{}, state: map[string]PodState{}}
}

func memcpyRec(dev uint32, copyKind record.CopyKind, src, dst record.MemoryKind, bytes uint64) record.Record {
	return record.Record{Kind: record.KindMemcpy, Device: dev, CopyKind: copyKind, SrcKind: src, DstKind: dst, Bytes: bytes, Start: 0, End: 1000}
}

func resolutions(t *testing.T, a *Aggregator) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range family(t, a.Snapshot(), "cupti_activity_pod_resolutions_total").Samples {
		out[s.LabelValues[0]] = s.Value
	}
	return out
}

// Two pods time-share one GPU: every workload family carries each pod's labels.
func TestAggregatorTwoPodsOneGPU(t *testing.T) {
	const cgA, cgB = "0::/kubepods/pod-a/ctr-a", "0::/kubepods/pod-b/ctr-b"
	res := newMapResolver()
	res.pods[cgA] = Pod{"trainer-a", "team-a", "main"}
	res.pods[cgB] = Pod{"infer-b", "team-b", "server"}
	a := NewAggregator(withFullSplit(), WithPodResolver(res.resolve))
	pa := &record.Process{PID: 10, StartTime: 1, Cgroup: cgA, DeviceUUIDs: []string{"GPU-aaaa"}}
	pb := &record.Process{PID: 10, StartTime: 2, Cgroup: cgB, DeviceUUIDs: []string{"GPU-aaaa"}} // same pid, other PID namespace
	a.Connect(pa)
	a.Connect(pb)
	a.Add(pa, []record.Record{kernel(0, "_Z4gemmv", 3_000_000), memcpyRec(0, copyHtoD, memPageable, memDevice, 1<<20),
		{Kind: record.KindMemset, MemoryKind: memDevice, Bytes: 64, Start: 0, End: 10}})
	a.Add(pb, []record.Record{kernel(0, "_Z4gemmv", 1_000_000), memcpyRec(0, copyHtoD, memPageable, memDevice, 4096),
		memcpyRec(0, copyDtoH, memDevice, memPinned, 100)})
	s := a.Snapshot()

	podA := []string{"0", "GPU-aaaa", "team-a", "trainer-a", "main"}
	podB := []string{"0", "GPU-aaaa", "team-b", "infer-b", "server"}
	with := func(base []string, more ...string) []string { return append(append([]string(nil), base...), more...) }
	if v := mustSample(t, s, "cupti_kernel_gpu_seconds_total", podA...).Value; !approx(v, 3e-3) {
		t.Errorf("pod a GPU seconds %g, want 0.003", v)
	}
	if v := mustSample(t, s, "cupti_kernel_gpu_seconds_total", podB...).Value; !approx(v, 1e-3) {
		t.Errorf("pod b GPU seconds %g, want 0.001", v)
	}
	if h := mustSample(t, s, "cupti_kernel_duration_seconds", with(podA, "gemm")...).Histogram; h.Count != 1 || !approx(h.Sum, 3e-3) {
		t.Errorf("pod a gemm: %d/%g", h.Count, h.Sum)
	}
	if h := mustSample(t, s, "cupti_kernel_duration_seconds", with(podB, "gemm")...).Histogram; h.Count != 1 || !approx(h.Sum, 1e-3) {
		t.Errorf("pod b gemm: %d/%g", h.Count, h.Sum)
	}
	// The pageable copies of each pod, as the "Pageable copies per pod" panel sums them.
	if v := mustSample(t, s, "cupti_memcpy_bytes_total", with(podA, "HtoD", "pageable", "")...).Value; v != 1<<20 {
		t.Errorf("pod a pageable bytes %g", v)
	}
	if v := mustSample(t, s, "cupti_memcpy_bytes_total", with(podB, "HtoD", "pageable", "")...).Value; v != 4096 {
		t.Errorf("pod b pageable bytes %g", v)
	}
	if h := mustSample(t, s, "cupti_memcpy_duration_seconds", with(podB, "DtoH", "pinned", "")...).Histogram; h.Count != 1 {
		t.Errorf("pod b DtoH count %d", h.Count)
	}
	mustSample(t, s, "cupti_memset_bytes_total", with(podA, "device")...)
	if n := len(family(t, s, "cupti_memcpy_bytes_total").Samples); n != 3 {
		t.Errorf("%d memcpy series, want 3: %v", n, labelSets(family(t, s, "cupti_memcpy_bytes_total")))
	}
	if n := len(family(t, s, "cupti_kernel_duration_seconds").Samples); n != 2 {
		t.Errorf("%d kernel series, want 2", n)
	}
	if r := resolutions(t, a); r["cgroup"] != 2 {
		t.Errorf("resolutions %v, want 2 by cgroup", r)
	}
}

func TestAggregatorPodSources(t *testing.T) {
	res := newMapResolver()
	res.pods["cg-real"] = Pod{"real", "ns", "c"}
	a := NewAggregator(withFullSplit(), WithPodResolver(res.resolve))
	uuids := []string{"GPU-aaaa"}
	for _, tc := range []struct {
		name   string
		p      *record.Process
		labels []string
	}{
		{"cgroup wins over the hello", &record.Process{PID: 1, Cgroup: "cg-real", Pod: "stale", Namespace: "old", Container: "x"},
			[]string{"ns", "real", "c"}},
		{"hello is the fallback", &record.Process{PID: 2, Cgroup: "0::/", Pod: "p", Namespace: "ns2", Container: "main"},
			[]string{"ns2", "p", "main"}},
		{"a stray CONTAINER_NAME adds no label", &record.Process{PID: 3, Cgroup: "0::/user.slice", Container: "app"},
			[]string{"", "", ""}},
		{"POD_NAME without POD_NAMESPACE names no pod", &record.Process{PID: 4, Pod: "p", Container: "app"},
			[]string{"", "", ""}},
	} {
		tc.p.DeviceUUIDs = uuids
		a.Connect(tc.p)
		a.Add(tc.p, []record.Record{kernel(0, "k", 1000)})
		s := a.Snapshot()
		if mustSample(t, s, "cupti_kernel_gpu_seconds_total", append([]string{"0", "GPU-aaaa"}, tc.labels...)...) == nil {
			t.Errorf("%s: no series %v", tc.name, tc.labels)
		}
	}
	if r := resolutions(t, a); r["cgroup"] != 1 || r["hello"] != 1 || r["none"] != 2 {
		t.Errorf("resolutions %v, want cgroup 1, hello 1, none 2", r)
	}

	// Without a resolver (sidecar mode, a host outside Kubernetes) the hello alone decides,
	// with the same rule for CONTAINER_NAME.
	b := NewAggregator(withFullSplit())
	stray := &record.Process{PID: 5, Container: "my-app", DeviceUUIDs: uuids}
	b.Add(stray, []record.Record{kernel(0, "k", 1000)})
	mustSample(t, b.Snapshot(), "cupti_kernel_gpu_seconds_total", "0", "GPU-aaaa", "", "", "")
	mustSample(t, b.Snapshot(), "cupti_kernel_duration_seconds", "0", "GPU-aaaa", "", "", "", "k")
}

// recListener records the ProcessConnected calls.
type recListener struct {
	mu    sync.Mutex
	infos []ProcessInfo
}

func (l *recListener) ProcessConnected(_ *record.Process, info ProcessInfo) {
	l.mu.Lock()
	l.infos = append(l.infos, info)
	l.mu.Unlock()
}
func (l *recListener) Records(*record.Process, []record.Record)    {}
func (l *recListener) Coverage(*record.Process, []record.Interval) {}
func (l *recListener) ProcessDisconnected(*record.Process)         {}

func TestAggregatorPodPendingThenFound(t *testing.T) {
	clk := newFakeClock()
	res := newMapResolver()
	res.set("cg", Pod{"trainer-0", "ml", ""}, PodPending) // pod known, container not reported yet
	lis := &recListener{}
	a := NewAggregator(withClock(clk.now), WithPodResolver(res.resolve), WithListener(lis),
		WithPodRetry(time.Second, 10*time.Second))
	p := &record.Process{PID: 1, Cgroup: "cg", DeviceUUIDs: []string{"GPU-aaaa"}}
	a.Connect(p)
	a.Add(p, []record.Record{kernel(0, "k", 1000), memcpyRec(0, copyHtoD, memPageable, memDevice, 10)})
	calls := res.calls
	clk.advance(500 * time.Millisecond)
	a.Add(p, []record.Record{kernel(0, "k", 1000)}) // before the retry time: not asked
	if res.calls != calls {
		t.Errorf("resolver asked %d times before the retry interval", res.calls-calls)
	}
	res.set("cg", Pod{"trainer-0", "ml", "main"}, PodFound)
	clk.advance(600 * time.Millisecond)
	a.Add(p, []record.Record{kernel(0, "k", 2000), memcpyRec(0, copyHtoD, memPageable, memDevice, 20)})
	s := a.Snapshot()
	partial := []string{"0", "GPU-aaaa", "ml", "trainer-0", ""}
	full := []string{"0", "GPU-aaaa", "ml", "trainer-0", "main"}
	if v := mustSample(t, s, "cupti_kernel_gpu_seconds_total", partial...).Value; !approx(v, 2e-6) {
		t.Errorf("before resolution: %g GPU seconds, want 2e-6", v)
	}
	if v := mustSample(t, s, "cupti_kernel_gpu_seconds_total", full...).Value; !approx(v, 2e-6) {
		t.Errorf("after resolution: %g GPU seconds, want 2e-6", v)
	}
	if v := mustSample(t, s, "cupti_memcpy_bytes_total", append(full, "HtoD", "pageable", "")...).Value; v != 20 {
		t.Errorf("after resolution: %g memcpy bytes, want 20", v)
	}
	if r := resolutions(t, a); r["cgroup_late"] != 1 || r["cgroup"] != 0 {
		t.Errorf("resolutions %v, want cgroup_late 1", r)
	}
	if len(lis.infos) != 2 || lis.infos[0].Container != "" || lis.infos[1].Container != "main" {
		t.Errorf("listener infos %+v, want the partial then the full pod", lis.infos)
	}
	calls = res.calls
	clk.advance(5 * time.Second)
	a.Add(p, []record.Record{kernel(0, "k", 1)})
	if res.calls != calls {
		t.Error("resolver asked again after a final answer")
	}

	// The partial series expires after the TTL although the process is still connected
	// under its new labels; the interned old labels go with it.
	clk.advance(DefaultSeriesTTL)
	a.Add(p, []record.Record{kernel(0, "k", 1)})
	s = a.Snapshot()
	if sample(t, s, "cupti_kernel_gpu_seconds_total", partial...) != nil || sample(t, s, "cupti_memcpy_bytes_total", append(partial, "HtoD", "pageable", "")...) != nil {
		t.Error("series of the superseded labels still exported after the TTL")
	}
	mustSample(t, s, "cupti_memcpy_bytes_total", append(full, "HtoD", "pageable", "")...) // connected: kept
	if _, ok := a.pods[podID{"ml", "trainer-0", ""}]; ok {
		t.Error("superseded labels still interned")
	}
}

func TestAggregatorPodPendingTimesOut(t *testing.T) {
	clk := newFakeClock()
	res := newMapResolver()
	res.set("cg", Pod{}, PodPending) // never known
	a := NewAggregator(withClock(clk.now), WithPodResolver(res.resolve), WithPodRetry(time.Second, 3*time.Second))
	p := &record.Process{PID: 1, Cgroup: "cg", Pod: "from-hello", Namespace: "ns", DeviceUUIDs: []string{"GPU-aaaa"}}
	a.Connect(p)
	for range 10 {
		clk.advance(time.Second)
		a.Add(p, []record.Record{kernel(0, "k", 1000)})
	}
	if res.calls != 4 { // at connect, then at 1, 2 and 3 s; the 3 s answer ends the window
		t.Errorf("resolver asked %d times, want 4", res.calls)
	}
	if r := resolutions(t, a); r["timed_out"] != 1 {
		t.Errorf("resolutions %v, want timed_out 1", r)
	}
	// Meanwhile, and after, the hello labels the process.
	if v := mustSample(t, a.Snapshot(), "cupti_kernel_gpu_seconds_total", "0", "GPU-aaaa", "ns", "from-hello", "").Value; !approx(v, 1e-5) {
		t.Errorf("hello-labelled GPU seconds %g, want 1e-5", v)
	}
}

func TestAggregatorPodSeriesExpire(t *testing.T) {
	clk := newFakeClock()
	res := newMapResolver()
	res.pods["cg"] = Pod{"gone", "ns", "c"}
	a := NewAggregator(withClock(clk.now), WithPodResolver(res.resolve), WithSeriesTTL(time.Minute))
	p := &record.Process{PID: 1, Cgroup: "cg", DeviceUUIDs: []string{"GPU-aaaa"}}
	stay := testProcess(2)
	for _, q := range []*record.Process{p, stay} {
		a.Connect(q)
		a.Add(q, []record.Record{kernel(0, "k", 1000), memcpyRec(0, copyDtoD, memDevice, memDevice, 8), {Kind: record.KindMemset, MemoryKind: memDevice, Bytes: 4, End: 1}})
	}
	a.Disconnect(p)
	clk.advance(30 * time.Second)
	mustSample(t, a.Snapshot(), "cupti_memcpy_bytes_total", "0", "GPU-aaaa", "ns", "gone", "c", "DtoD", "none", "")
	clk.advance(31 * time.Second)
	s := a.Snapshot()
	for _, name := range []string{"cupti_kernel_duration_seconds", "cupti_kernel_gpu_seconds_total", "cupti_memcpy_bytes_total", "cupti_memset_bytes_total"} {
		for _, sm := range family(t, s, name).Samples {
			if sm.LabelValues[3] == "gone" {
				t.Errorf("%s%v of a pod gone for longer than the TTL still exported", name, sm.LabelValues)
			}
		}
	}
	mustSample(t, s, "cupti_memset_bytes_total", "0", "GPU-aaaa", "ml", "trainer-0", "main", "device") // still connected
	if len(a.pods) != 1 {
		t.Errorf("%d interned pods, want 1 (the connected one)", len(a.pods))
	}
}
