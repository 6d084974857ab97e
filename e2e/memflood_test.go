package e2e

// A flood of activity clients against the binary on the fake libcupti (issue 22 item 5):
// everything a client can make the exporter hold, attribution included, stays inside the one
// memory budget, and the gauges show it while it happens.

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

const fakeGPU1 = "GPU-f1010203-0405-0607-0809-0a0b0c0d0e0f" // the fake's device 1

// procKiB reads a field of /proc/<pid>/status in KiB (VmRSS, VmHWM).
func procKiB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// floodRecords are kernel records on both GPUs, each with a name of its own and a span near
// now that reaches floodReach into the future: every one is pending (or carried) for the join
// until the samples catch up with its end.
func floodRecords(conn, batch, n int, base uint64) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		start := base + uint64(i)*1000
		recs[i] = record.Record{Kind: record.KindKernel, Device: uint32(i % 2), Start: start, End: start + uint64(floodReach),
			Name: fmt.Sprintf("_Z5floodv_%d_%d_%d", conn, batch, i%512)}
	}
	return recs
}

const floodReach = 50 * time.Second // within the minute a record may end ahead of the samples

// 64 connections send kernel records as fast as they can for a few seconds. Before, the
// attribution join held them outside the budget (RSS 48 MB -> 986 MB on the report's
// machine) while cupti_attribution_pending_records read 0 at every scrape.
func TestActivityFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("a 64-connection flood of several seconds")
	}
	const budget = 64 << 20
	p, sock := startFake(t, "--activity.max-connections-per-identity=64", fmt.Sprintf("--activity.memory-budget=%d", budget))
	pid := p.cmd.Process.Pid
	waitFor(t, "samples", func() bool {
		_, fams := p.scrape(t)
		v, ok := series(fams, "cupti_pm_samples_total", map[string]string{"gpu": "1"})
		return ok && v > 100
	})
	rss0 := procKiB(t, pid, "VmRSS")
	dur := 8 * time.Second
	if s := os.Getenv("E2E_FLOOD_SECONDS"); s != "" {
		n, _ := strconv.Atoi(s)
		dur = time.Duration(n) * time.Second
	}
	stop := time.Now().Add(dur)
	var sent atomic.Int64
	wg := flood(sock, func() bool { return time.Now().Before(stop) }, &sent)
	var maxPending, maxMem, maxAttr float64
	var peakHeap float64
	for time.Now().Before(stop) {
		time.Sleep(500 * time.Millisecond)
		_, fams := p.scrape(t)
		pend := 0.0
		for _, m := range fams["cupti_attribution_pending_records"].GetMetric() {
			pend += value(m)
		}
		maxPending = max(maxPending, pend)
		v, _ := series(fams, "cupti_activity_memory_bytes", nil)
		maxMem = max(maxMem, v)
		a, _ := series(fams, "cupti_attribution_memory_bytes", nil)
		maxAttr = max(maxAttr, a)
		h, _ := series(fams, "go_memstats_heap_inuse_bytes", nil)
		peakHeap = max(peakHeap, h)
	}
	wg.Wait()
	rss1, hwm := procKiB(t, pid, "VmRSS"), procKiB(t, pid, "VmHWM")
	_, fams := p.scrape(t)
	drops := map[string]float64{}
	for _, m := range fams["cupti_attribution_dropped_records_total"].GetMetric() {
		drops[labels(m)["reason"]] = value(m)
	}
	t.Logf("flood: %d records sent in %s by 64 connections; RSS %d -> %d KiB (peak %d KiB); heap in use peak %.0f MiB; "+
		"pending records peak %.0f; budget used peak %.0f MiB (attribution's share %.0f MiB); attribution drops %v",
		sent.Load(), dur, rss0, rss1, hwm, peakHeap/(1<<20), maxPending, maxMem/(1<<20), maxAttr/(1<<20), drops)
	// Before: RSS 66 MB -> 3.0 GB here (the join's buffers), the budget gauge at 22 MiB.
	// Now the heap follows the budget: baseline + budget + the collector's headroom.
	if limit := int64(rss0) + 3*budget>>10; hwm > limit {
		t.Errorf("peak RSS %d KiB, want at most %d KiB (start %d KiB + 3 x the %d MiB budget)", hwm, limit, rss0, budget>>20)
	}
	if maxMem > budget+8<<20 {
		t.Errorf("cupti_activity_memory_bytes peaked at %.0f MiB, budget %d MiB", maxMem/(1<<20), budget>>20)
	}
	if maxAttr <= 0 || maxPending <= 0 {
		t.Errorf("attribution memory peak %g bytes, pending records peak %g: the gauges missed the flood", maxAttr, maxPending)
	}
}

// SIGTERM while 64 connections flood the socket ends the exporter promptly (before: 0.5-1.5 s
// on the report's machine), with exit code 0 and the socket file removed.
func TestShutdownUnderFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a flood of several seconds")
	}
	p, sock := startFake(t, "--activity.max-connections-per-identity=64")
	stop := make(chan struct{})
	var sent atomic.Int64
	wg := flood(sock, func() bool {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}, &sent)
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(3 * time.Second)
	t0 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.wait(t)
	took := time.Since(t0)
	t.Logf("SIGTERM under a 64-connection flood: exited after %s (%v)", took.Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("exit %v, want 0", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
	if took > 2*time.Second {
		t.Errorf("shutdown took %s under the flood, want under 2 s", took)
	}
}

// flood opens 64 connections from this process (one verified identity) that send batches
// of 4,096 kernel records on GPUs 0 and 1 while more says so, counting them in sent; the
// wait group ends when every connection has.
func flood(sock string, more func() bool, sent *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for c := range 64 {
		wg.Go(func() {
			conn, err := net.Dial("unix", sock)
			if err != nil {
				return
			}
			defer conn.Close()
			enc := wire.NewEncoder(conn)
			if enc.Hello(record.Process{PID: uint32(os.Getpid()), StartTime: selfStartTime(), Executable: "/bin/flood", DeviceUUIDs: []string{fakeGPU0, fakeGPU1}}) != nil {
				return
			}
			for b := 0; more(); b++ {
				if enc.Records(0, floodRecords(c, b, 4096, uint64(time.Now().UnixNano()))) != nil {
					return
				}
				sent.Add(4096)
			}
		})
	}
	return &wg
}
