package e2e

// Kernel names made to be costly to demangle, against the binary on the fake libcupti (issue
// 30 item 1): before, a 325-byte name pinned a core for ever and SIGTERM then hung.

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// hostileKernelName is the i-th name of the flood, about 1 KiB (the k=40 conversion-operator
// name is 325 bytes): shapes on which demangling cost grew faster than the length, each name
// distinct so that no cache helps.
func hostileKernelName(i int) string {
	id := fmt.Sprintf("%05d", i)
	switch i % 5 {
	case 0: // nested conversion operators: 2^k
		return "_Z" + strings.Repeat("NcvT_I", 40) + "6u" + id + strings.Repeat("EE", 40)
	case 1: // parameters each copying the one before twice: 2^k
		s := "_ZZ6f" + id + "IiEv1cIT_T_E"
		for j := range 80 {
			ref := "S" + strings.ToUpper(strconv.FormatInt(int64(2*j+3), 36)) + "_"
			s += "1cI" + ref + ref + "E"
		}
		return s + "E1x"
	case 2: // nested lambdas
		s := "6f" + id + "v"
		for range 140 {
			s = "Z" + s + "EUlvE_"
		}
		return "_Z" + s
	case 3: // nested pointers
		return "_Z6f" + id + "I" + strings.Repeat("P", 1000) + "iEv"
	default: // a pack expanded over a long pattern
		return "_ZZ6f" + id + "IJ" + strings.Repeat("i", 300) + "EEvDp" + strings.Repeat("P", 670) + "T_E1x"
	}
}

// cpuTicks is the user and system CPU time of process pid, in clock ticks (1/100 s).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	s, _ := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	return u + s
}

// Four connections each send the k=40 name, then 2 MB of hostile names between them, while
// /metrics is scraped. Every record is counted, the names are counted as not demangled,
// scrapes stay within 100 ms of an idle one, and SIGTERM ends the exporter within 2 s. Before,
// the four connections never got past their first name (four cores pinned for ever), their
// records were never counted, and the exporter did not exit on SIGTERM.
func TestHostileKernelNames(t *testing.T) {
	p, sock := startFake(t)
	pid := p.cmd.Process.Pid
	idle := p.scrapeTimes(t, 20) // scrapes without the flood: a loaded machine is slow without any client
	stopScraping := p.scrapeMeanwhile(t)

	const conns, perBatch = 4, 64
	cpu0 := cpuTicks(t, pid)
	sent, bytes := 0, 0
	var batches [conns][][]record.Record
	for c := range conns {
		batches[c] = append(batches[c], []record.Record{{Kind: record.KindKernel, Start: 1, End: 2,
			Name: "_Z" + strings.Repeat("NcvT_I", 40) + "2u0" + strings.Repeat("EE", 40)}})
		sent++
	}
	for i := 0; bytes < 2<<20; {
		for c := range conns {
			recs := make([]record.Record, perBatch)
			for j := range recs {
				name := hostileKernelName(i)
				i++
				bytes += len(name)
				recs[j] = record.Record{Kind: record.KindKernel, Start: 1, End: 2, Name: name}
			}
			batches[c] = append(batches[c], recs)
			sent += perBatch
		}
	}
	var senders sync.WaitGroup
	for c := range conns {
		conn, enc := dialActivity(t, sock)
		conn.SetWriteDeadline(time.Now().Add(20 * time.Second)) // the old exporter stopped reading
		h := honest()
		h.DeviceUUIDs = []string{fakeGPU0}
		if err := enc.Hello(h); err != nil {
			t.Fatal(err)
		}
		senders.Go(func() {
			for _, recs := range batches[c] {
				if err := enc.Records(0, recs); err != nil {
					t.Errorf("connection %d: %v", c, err)
					return
				}
			}
		})
	}
	senders.Wait()
	var counted float64
	for deadline := time.Now().Add(15 * time.Second); counted != float64(sent) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		_, fams := p.scrape(t)
		counted, _ = series(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})
	}
	if counted != float64(sent) { // not fatal: SIGTERM is checked too
		t.Errorf("%g kernel records counted after 15 s, want %d", counted, sent)
	}
	cpu := time.Duration(cpuTicks(t, pid)-cpu0) * 10 * time.Millisecond
	during := stopScraping()

	_, fams := p.scrape(t)
	notDemangled := map[string]float64{}
	for _, m := range fams["cupti_activity_kernel_names_not_demangled_total"].GetMetric() {
		notDemangled[labels(m)["reason"]] = value(m)
	}
	slices.Sort(idle)
	slices.Sort(during)
	median := func(d []time.Duration) time.Duration { return d[len(d)/2] }
	t.Logf("%d hostile names (%d KiB) on %d connections: exporter CPU %v (scrapes and sampling included); "+
		"%d scrapes during the flood, median %v, slowest %v (idle: median %v, slowest %v); not demangled %v",
		sent, bytes>>10, conns, cpu, len(during), median(during), during[len(during)-1], median(idle), idle[len(idle)-1], notDemangled)
	if notDemangled["cast_operators"] < conns {
		t.Errorf("cast_operators not demangled %g, want at least %d", notDemangled["cast_operators"], conns)
	}
	for _, m := range fams["cupti_kernel_duration_seconds"].GetMetric() {
		if k := labels(m)["kernel"]; len(k) > 120 {
			t.Errorf("kernel label of %d bytes", len(k))
		}
	}
	if median(during) > median(idle)+100*time.Millisecond {
		t.Errorf("scrapes took %v (median) during the flood, %v idle, want within 100 ms", median(during), median(idle))
	}

	// net/http's Shutdown waits up to 5 s for a connection that sent no request yet, which the
	// client's pool can hold after concurrent scrapes: close them first.
	http.DefaultClient.CloseIdleConnections()
	t0 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.wait(t)
	took := time.Since(t0)
	t.Logf("SIGTERM: exited after %v (%v)", took.Round(time.Millisecond), err)
	if err != nil {
		t.Errorf("exit %v, want 0", err)
	}
	if took > 2*time.Second {
		t.Errorf("exit took %v after SIGTERM, want under 2 s:\n%s", took, p.out.String())
	}
}
