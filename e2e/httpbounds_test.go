package e2e

// Idle and slow HTTP clients against the binary (issue 30 item 2): connections are bounded
// per listener and closed when idle, and the activity socket keeps its descriptors whatever
// the number of HTTP clients. The binary runs under RLIMIT_NOFILE 1024 (prlimit), so that a
// few thousand connections reach the limit; before, they exhausted it and the activity
// socket's accept failed with "too many open files".

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// startLimited is startEnv under prlimit --nofile=nofile.
func startLimited(t *testing.T, nofile int, env []string, args ...string) *exporterProc {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) not found")
	}
	return startServing(t, []string{prlimit, fmt.Sprintf("--nofile=%d:%d", nofile, nofile)}, env, "/readyz", 30*time.Second, nil, args...)
}

// openFDs counts the descriptors process pid has open.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// timedScrape scrapes /metrics on a fresh connection, within 10 s.
func timedScrape(p *exporterProc) (time.Duration, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := client.Get("http://" + p.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("scrape: %s", resp.Status)
	}
	return time.Since(start), nil
}

// Thousands of clients that each send one request and then hold their connection idle:
// the exporter holds at most its limit of them (the newest replace the idle longest), its
// descriptors and memory stay bounded, the activity socket accepts and counts a sender,
// /metrics answers as fast as without them, and after the idle timeout every one is closed.
func TestHTTPIdleConnectionsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("thousands of connections")
	}
	const nofile = 1024
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	clients := min(4000, int(rl.Cur)-256)
	if clients < 2*nofile {
		t.Skipf("this test process may open %d descriptors: too few to exceed the exporter's %d", rl.Cur, nofile)
	}
	lib, env := fakeCUPTI(t)
	sock := t.TempDir() + "/activity.sock"
	const idle = 2 * time.Second
	p := startLimited(t, nofile, env, "serve", lib, fakeMetricsFlag, "--activity.socket="+sock, "--web.idle-timeout="+idle.String())
	pid := p.cmd.Process.Pid
	_, fams := p.scrape(t)
	limit, ok := series(fams, "cupti_exporter_http_connections_limit", map[string]string{"listener": "web"})
	if !ok || limit < 16 || limit >= nofile {
		t.Fatalf("web connection limit %g (found %v), want it fitted under RLIMIT_NOFILE %d", limit, ok, nofile)
	}
	usual, err := timedScrape(p)
	if err != nil {
		t.Fatal(err)
	}
	rss0, fds0 := procKiB(t, pid, "VmRSS"), openFDs(t, pid)

	// The clients: one request each (some are closed before their answer, to make room),
	// then idle.
	conns := make([]net.Conn, clients)
	var answered, dialFailed atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < clients; i = int(next.Add(1) - 1) {
				c, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err != nil {
					dialFailed.Add(1)
					continue
				}
				conns[i] = c
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
					continue
				}
				if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					answered.Add(1)
				}
				c.SetDeadline(time.Time{})
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	t.Logf("%d clients: %d answered, %d could not connect", clients, answered.Load(), dialFailed.Load())

	// While they are held: bounded descriptors and memory, an activity sender served,
	// /metrics as fast as before.
	fds1, rss1 := openFDs(t, pid), procKiB(t, pid, "VmRSS")
	t.Logf("exporter: %d descriptors (%d before), RSS %d MiB (%d MiB before), web limit %g", fds1, fds0, rss1>>10, rss0>>10, limit)
	if fds1 > fds0+int(limit)+exporterHealthSlack {
		t.Errorf("%d descriptors open, %d before: more than the web limit %g allows", fds1, fds0, limit)
	}
	if grew := rss1 - rss0; grew > 48<<10 {
		t.Errorf("RSS grew %d MiB with the clients held", grew>>10)
	}
	sendKernels(t, sock, honest(), 10, "_Z6boundsv")
	waitFor(t, "the activity sender's records counted", func() bool {
		_, fams := p.scrape(t)
		v, _ := series(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})
		return v == 10
	})
	took, err := timedScrape(p)
	if err != nil {
		t.Fatalf("scrape with %d clients held: %v", clients, err)
	}
	if took > usual+2*time.Second {
		t.Errorf("scrape took %s with the clients held, %s without", took, usual)
	}
	_, fams = p.scrape(t)
	if v, _ := series(fams, "cupti_exporter_http_connections", map[string]string{"listener": "web"}); v > limit {
		t.Errorf("%g web connections open, limit %g", v, limit)
	}
	if v, _ := series(fams, "cupti_exporter_http_connections_closed_total", map[string]string{"listener": "web", "reason": "evicted"}); v < float64(clients)-limit {
		t.Errorf("%g connections evicted, want at least %g (clients past the limit)", v, float64(clients)-limit)
	}

	// After the idle timeout, every client finds its connection closed.
	time.Sleep(idle + time.Second)
	open := 0
	for _, c := range conns {
		if c == nil {
			continue
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); err != nil && os.IsTimeout(err) {
			open++
		}
	}
	if open > 0 {
		t.Errorf("%d connections still open %s after they went idle (idle timeout %s)", open, idle+time.Second, idle)
	}
	_, fams = p.scrape(t)
	if v, _ := series(fams, "cupti_exporter_http_connections_closed_total", map[string]string{"listener": "web", "reason": "timeout"}); v == 0 {
		t.Error("no idle timeout counted")
	}
	if strings.Contains(p.out.String(), "too many open files") {
		t.Error("the exporter ran out of descriptors")
	}
}

// exporterHealthSlack is what else may be open while the clients are held: the test's own
// scrapes, transient file reads.
const exporterHealthSlack = 32
