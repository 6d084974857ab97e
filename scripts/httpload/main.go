// Command httpload measures the exporter's HTTP listeners under load (docs/security.md,
// "HTTP listeners"):
//
//	httpload -mode scrape -addr 127.0.0.1:9477 -pid PID -clients 50 -duration 20s [-vary] [-names]
//	httpload -mode idle -addr 127.0.0.1:9477 -pid PID -conns 5000 -hold 10s [-socket activity.sock]
//
// scrape: clients scrape /metrics back to back; -vary gives every request its own query
// string and one of several Accept and Accept-Encoding headers; -names a name[] filter of
// its own (every family, plus a made-up name), a distinct render each. It prints the latency
// percentiles, the status counts and the exporter's CPU (from /proc/PID/stat).
// idle: conns clients send one request each and keep their connection idle; it prints how
// many the exporter still holds after -hold, its RSS and descriptors, and a scrape's time
// while they are held.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	mode := flag.String("mode", "scrape", "scrape or idle")
	addr := flag.String("addr", "127.0.0.1:9477", "exporter's listen address")
	pid := flag.Int("pid", 0, "exporter's PID (CPU, RSS, descriptors); 0: not read")
	clients := flag.Int("clients", 50, "scrape: concurrent scrapers")
	duration := flag.Duration("duration", 20*time.Second, "scrape: how long")
	vary := flag.Bool("vary", false, "scrape: vary the query string, Accept and Accept-Encoding")
	names := flag.Bool("names", false, "scrape: give every request a name[] filter of its own (every family plus a made-up name)")
	honest := flag.Bool("honest", false, "scrape: one more scraper, as Prometheus scrapes (OpenMetrics, gzip, 10 s timeout), every second; its results apart")
	conns := flag.Int("conns", 5000, "idle: connections")
	hold := flag.Duration("hold", 10*time.Second, "idle: how long to hold them before counting")
	path := flag.String("path", "/healthz", "idle: the one request's path")
	socket := flag.String("socket", "", "idle: the activity socket, connected to while the connections are held (its accept shows in the exporter's log)")
	flag.Parse()
	switch *mode {
	case "scrape":
		scrape(*addr, *pid, *clients, *duration, *vary, *names, *honest)
	case "idle":
		idle(*addr, *pid, *conns, *hold, *path, *socket)
	default:
		fmt.Fprintln(os.Stderr, "-mode scrape or idle")
		os.Exit(2)
	}
}

var (
	accepts = []string{"text/plain", "text/plain;version=0.0.4", "*/*", "application/openmetrics-text;version=1.0.0",
		"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}
	encodings = []string{"gzip", "identity", "gzip, deflate", ""}
)

func scrape(addr string, pid, clients int, d time.Duration, vary, names, honest bool) {
	var filter string
	if names {
		filter = familyFilter(addr)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var mu sync.Mutex
	var lat []time.Duration
	codes := map[string]int{}
	cpu0 := cpuSeconds(pid)
	start := time.Now()
	stop := start.Add(d)
	var wg sync.WaitGroup
	if honest {
		wg.Go(func() { prometheusLike(addr, stop) })
	}
	for i := range clients {
		wg.Go(func() {
			for n := 0; time.Now().Before(stop); n++ {
				url := "http://" + addr + "/metrics"
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Accept", accepts[0])
				req.Header.Set("Accept-Encoding", "gzip")
				if vary {
					req.URL.RawQuery = fmt.Sprintf("client=%d&n=%d&r=%d", i, n, rand.Int64())
					req.Header.Set("Accept", accepts[rand.IntN(len(accepts))])
					req.Header.Set("Accept-Encoding", encodings[rand.IntN(len(encodings))])
				}
				if names {
					req.URL.RawQuery = fmt.Sprintf("%sname[]=x%d", filter, rand.Int64())
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				code := "error"
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					code = strconv.Itoa(resp.StatusCode)
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	cpu := cpuSeconds(pid) - cpu0
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("scrape clients=%d vary=%v names=%v requests=%d (%.0f/s) codes=%v p50=%s p99=%s max=%s exporter_cpu=%.2f s/s\n",
		clients, vary, names, len(lat), float64(len(lat))/wall, codes, pct(0.5).Round(100*time.Microsecond),
		pct(0.99).Round(100*time.Microsecond), lat[len(lat)-1].Round(time.Millisecond), cpu/wall)
}

// prometheusLike scrapes as Prometheus does, every second until stop, and prints how it went.
func prometheusLike(addr string, stop time.Time) {
	client := &http.Client{Timeout: 10 * time.Second}
	var lat []time.Duration
	ok, n := 0, 0
	for ; time.Now().Before(stop); time.Sleep(time.Second) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4")
		req.Header.Set("Accept-Encoding", "gzip")
		t0 := time.Now()
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ok++
			}
		}
		n++
		lat = append(lat, time.Since(t0))
	}
	slices.Sort(lat)
	fmt.Printf("prometheus-like scraper: %d of %d scrapes ok, p50=%s max=%s\n", ok, n,
		lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)-1].Round(time.Millisecond))
}

func idle(addr string, pid, n int, hold time.Duration, path, socket string) {
	rss0, fds0 := rssMiB(pid), fds(pid)
	held := make([]net.Conn, n)
	var answered, failed atomic.Int64
	next := atomic.Int64{}
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				held[i] = c
				c.SetDeadline(time.Now().Add(5 * time.Second))
				fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
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
	opened := time.Since(start)
	if socket != "" {
		if c, err := net.Dial("unix", socket); err == nil {
			defer c.Close()
		} else {
			fmt.Println("activity socket:", err)
		}
	}
	time.Sleep(hold)
	open := 0
	for _, c := range held {
		if c == nil {
			continue
		}
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && os.IsTimeout(err) {
			open++
		}
	}
	scrapeTook, scrapeErr := oneScrape(addr)
	fmt.Printf("idle conns=%d answered=%d dial_failed=%d opened_in=%s; after %s: still_open=%d exporter_rss_anon=%d->%d MiB fds=%d->%d scrape=%s err=%v\n",
		n, answered.Load(), failed.Load(), opened.Round(time.Millisecond), hold, open, rss0, rssMiB(pid), fds0, fds(pid),
		scrapeTook.Round(time.Millisecond), scrapeErr)
	for _, c := range held {
		if c != nil {
			c.Close()
		}
	}
}

// familyFilter is a name[] parameter for every family /metrics serves now.
func familyFilter(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "#" && f[1] == "TYPE" {
			b.WriteString("name[]=" + f[2] + "&")
		}
	}
	return b.String()
}

func oneScrape(addr string) (time.Duration, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t0 := time.Now()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return time.Since(t0), err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return time.Since(t0), nil
}

// cpuSeconds is the user plus system CPU time of pid (0 when pid is 0).
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// rssMiB is the anonymous resident memory of pid (RssAnon: the binary's own mapped pages,
// which depend on the page cache, left out).
func rssMiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "RssAnon:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb >> 10
		}
	}
	return 0
}

func fds(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return len(ents)
}
