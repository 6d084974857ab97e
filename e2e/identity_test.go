package e2e

// Hostile activity clients that lie about who they are, against the binary on the fake
// libcupti (docs/security.md): the exporter takes identity from the kernel, and no label
// speaks for a process or pod that did not send it.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

const fakeGPU0 = "GPU-f0010203-0405-0607-0809-0a0b0c0d0e0f" // the fake's device 0

// honest is this test process's true hello, with its start time as the injection library
// computes it (a hello without one is refused).
func honest() record.Process {
	return record.Process{PID: uint32(os.Getpid()), StartTime: selfStartTime(), Executable: "/usr/bin/python3", DeviceUUIDs: []string{fakeGPU0}}
}

// selfStartTime is this process's start time as the injection library sends it: /proc/stat's
// btime plus /proc/self/stat's start time in clock ticks (100 a second), in ns.
func selfStartTime() uint64 {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		panic(err)
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	ticks, err := strconv.ParseUint(fields[22-3], 10, 64)
	if err != nil {
		panic(err)
	}
	sys, err := os.ReadFile("/proc/stat")
	if err != nil {
		panic(err)
	}
	_, after, _ := strings.Cut(string(sys), "\nbtime ")
	btime, err := strconv.ParseUint(strings.Fields(after)[0], 10, 64)
	if err != nil {
		panic(err)
	}
	return btime*1_000_000_000 + ticks*10_000_000
}

func dialActivity(t *testing.T, sock string) (net.Conn, *wire.Encoder) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, wire.NewEncoder(c)
}

// sendKernels connects to the activity socket as process p and sends n kernel records named
// name; the connection stays open until the caller closes it or the test ends.
func sendKernels(t *testing.T, sock string, p record.Process, n int, name string) net.Conn {
	t.Helper()
	c, enc := dialActivity(t, sock)
	if err := enc.Hello(p); err != nil {
		t.Fatal(err)
	}
	if err := enc.Records(0, kernels(n, name)); err != nil {
		t.Fatal(err)
	}
	return c
}

func kernels(n int, name string) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Kind: record.KindKernel, Start: 1, End: 1001, Name: name}
	}
	return recs
}

// noLabelValue fails when any series carries value v in any label.
func noLabelValue(t *testing.T, fams map[string]*dto.MetricFamily, v string) {
	t.Helper()
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), v) {
					t.Errorf("%s%v speaks for %q, which sent nothing", name, labels(m), v)
				}
			}
		}
	}
}

// A process claiming the exporter's own PID (to report drops for it) is refused; one naming a
// pod and cgroup it does not run in is taken as itself, without the pod; an honest process's
// records and drops all count.
func TestActivityIdentityClaims(t *testing.T) {
	p, sock := startFake(t)

	_, liar := dialActivity(t, sock)
	if err := liar.Hello(record.Process{PID: uint32(p.cmd.Process.Pid), StartTime: 1, DeviceUUIDs: []string{fakeGPU0}}); err != nil {
		t.Fatal(err)
	}
	liar.Drops(wire.Drops{wire.DropQueueFull: 1 << 39}) // written before the refusal reaches us

	_, podThief := dialActivity(t, sock)
	thief := honest()
	thief.Pod, thief.Namespace, thief.Container = "victim-pod", "prod", "main"
	thief.Cgroup = "0::/kubepods.slice/kubepods-pod99999999_8888_7777_6666_555555555555.slice/cri-containerd-" + strings.Repeat("b", 64) + ".scope"
	if err := podThief.Hello(thief); err != nil {
		t.Fatal(err)
	}
	if err := podThief.Records(0, kernels(500, "_Z5stealv")); err != nil {
		t.Fatal(err)
	}

	_, real := dialActivity(t, sock)
	if err := real.Hello(honest()); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if err := real.Records(0, kernels(1000, "_Z4realv")); err != nil {
			t.Fatal(err)
		}
	}
	if err := real.Goodbye(10_000, wire.Drops{wire.DropQueueFull: 5}); err != nil {
		t.Fatal(err)
	}

	var fams map[string]*dto.MetricFamily
	waitFor(t, "every record counted", func() bool {
		_, fams = p.scrape(t)
		v, _ := series(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})
		r, _ := series(fams, "cupti_activity_identities_total", map[string]string{"identity": "refused"})
		q, _ := series(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": "queue_full"})
		return v == 10_500 && r == 1 && q >= 5
	})
	for want, v := range map[string]float64{"verified": 2, "claimed": 0} {
		if got, _ := series(fams, "cupti_activity_identities_total", map[string]string{"identity": want}); got != v {
			t.Errorf("identities %s = %g, want %g", want, got, v)
		}
	}
	if v, _ := series(fams, "cupti_activity_refused_claims_total", map[string]string{"claim": "pid", "reason": "contradicted"}); v != 1 {
		t.Errorf("contradicted pid claims %g, want 1", v)
	}
	if v, _ := series(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": "queue_full"}); v != 5 {
		t.Errorf("queue_full %g, want the honest process's 5", v)
	}
	if v, _ := series(fams, "cupti_activity_pod_resolutions_total", map[string]string{"result": "unverified"}); v != 1 {
		t.Errorf("unverified pod claims %g, want 1", v)
	}
	noLabelValue(t, fams, "victim-pod")
	if !contains(p.out.String(), "the kernel contradicts its hello") {
		t.Error("no log line for the refused hello")
	}
}

// Invalid UTF-8 in a hello's pod fields is refused at the socket: OTLP pushes go on (before,
// every push failed with "string field contains invalid UTF-8"), and it is counted.
func TestActivityInvalidUTF8KeepsOTLP(t *testing.T) {
	r, addr := serveOTLPgRPC(t)
	// Hellos trusted: without the check at the socket the bad text would reach the labels.
	p, sock := startFake(t, "--activity.trust-hello-pods", "--otlp.endpoint="+addr, "--otlp.protocol=grpc",
		"--otlp.insecure", "--otlp.interval=300ms")
	bad := honest()
	bad.Pod, bad.Namespace, bad.Container = "trainer-\xff\xfe", "ml", "main\xc3"
	sendKernels(t, sock, bad, 10, "_Z4realv")
	waitFor(t, "the records", func() bool {
		_, fams := p.scrape(t)
		v, _ := series(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})
		return v == 10
	})
	for drained := false; !drained; {
		select {
		case <-r.got:
		default:
			drained = true
		}
	}
	for range 3 { // pushes made after the records: each arrives, with the kernel series
		req := r.next(t)
		found := false
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					found = found || m.GetName() == "cupti.kernel.time"
				}
			}
		}
		if !found {
			t.Fatal("an OTLP push without cupti.kernel.time")
		}
	}
	_, fams := p.scrape(t)
	for _, claim := range []string{"pod", "container"} {
		if v, _ := series(fams, "cupti_activity_refused_claims_total", map[string]string{"claim": claim, "reason": "invalid"}); v != 1 {
			t.Errorf("invalid %s claims %g, want 1", claim, v)
		}
	}
	if out := p.out.String(); strings.Contains(out, "invalid UTF-8") || strings.Contains(out, "level=ERROR") {
		t.Errorf("errors logged:\n%s", out)
	}
}

// Three connections flood new kernel names of 4 KiB of '<' (the shape that cost 2.8 ms each
// under the aggregator's lock and stalled /metrics for 8-9.6 s): every scrape during the flood
// still answers within 2 s.
func TestActivityNameFloodKeepsMetricsFast(t *testing.T) {
	if testing.Short() {
		t.Skip("floods 24 MiB of names")
	}
	p, sock := startFake(t)
	name := func(c, i int) string {
		id := fmt.Sprintf("%d-%d", c, i)
		return id + strings.Repeat("<", wire.MaxString-len(id))
	}
	// Scrapes without the flood first: a loaded machine is slow without any client.
	control := slices.Max(p.scrapeTimes(t, 10))
	stopScraping := p.scrapeMeanwhile(t)
	var flood sync.WaitGroup
	for c := range 3 {
		_, enc := dialActivity(t, sock)
		h := honest()
		if err := enc.Hello(h); err != nil {
			t.Fatal(err)
		}
		flood.Go(func() {
			recs := make([]record.Record, 100)
			for i := 0; i < 1900; i += len(recs) {
				for j := range recs {
					recs[j] = record.Record{Kind: record.KindKernel, Start: 1, End: 2, Name: name(c, i+j)}
				}
				if err := enc.Records(0, recs); err != nil {
					return // closed for its memory share: the flood is still on the others
				}
			}
		})
	}
	flood.Wait()
	time.Sleep(500 * time.Millisecond)
	during := stopScraping()
	slowest := slices.Max(during)
	t.Logf("%d scrapes during the flood, slowest %v (without it: %v)", len(during), slowest, control)
	if slowest > 2*time.Second+control {
		t.Errorf("a scrape took %v during the name flood", slowest)
	}
}
