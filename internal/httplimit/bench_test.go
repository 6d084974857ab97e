package httplimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/netutil"
)

// refuseListener closes newcomers past max at once (the alternative to eviction that
// keeps whoever came first).
type refuseListener struct {
	net.Listener
	max  int64
	open atomic.Int64
}

type countedConn struct {
	net.Conn
	once sync.Once
	l    *refuseListener
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

func (l *refuseListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// BenchmarkScrapeUnderFlood compares three ways to bound a listener's connections while
// an attacker opens connections as fast as it can, sends one request on each and keeps it
// idle, and a scraper (keep-alive, 10 s timeout like Prometheus's default) scrapes every
// 100 ms: evict (this package's Listener), queue (netutil.LimitListener: excess waits in
// the kernel backlog) and refuse (excess closed at once). It reports the share of failed
// scrapes and their p99 latency, and what the attacker managed.
//
//	go test -run '^$' -bench ScrapeUnderFlood -benchtime 20x ./internal/httplimit
func BenchmarkScrapeUnderFlood(b *testing.B) {
	const max = 64
	for _, policy := range []string{"evict", "queue", "refuse"} {
		b.Run(policy, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := &http.Server{Handler: ok}
			s := Settings{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute,
				IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
			var l net.Listener
			switch policy {
			case "evict":
				el := NewListener(ln, "web", max, NewMetrics("bench"))
				s.Apply(srv, el)
				l = el
			case "queue":
				l = netutil.LimitListener(ln, max)
				srv.ReadHeaderTimeout, srv.IdleTimeout = s.ReadHeaderTimeout, s.IdleTimeout
			case "refuse":
				l = &refuseListener{Listener: ln, max: max}
				srv.ReadHeaderTimeout, srv.IdleTimeout = s.ReadHeaderTimeout, s.IdleTimeout
			}
			go srv.Serve(l)
			defer srv.Close()
			addr := ln.Addr().String()

			// The attacker: 8 workers opening connections without pause, holding the last
			// 3,000 idle.
			stop := make(chan struct{})
			var mu sync.Mutex
			var held []net.Conn
			var answered atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						c, err := net.DialTimeout("tcp", addr, time.Second)
						if err != nil {
							continue
						}
						c.SetDeadline(time.Now().Add(time.Second))
						io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
						if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
							resp.Body.Close()
							answered.Add(1)
						}
						mu.Lock()
						held = append(held, c)
						if len(held) > 3000 { // keep the flood going: replace the oldest
							held[0].Close()
							held = held[1:]
						}
						mu.Unlock()
					}
				})
			}
			defer func() {
				close(stop)
				wg.Wait()
				for _, c := range held {
					c.Close()
				}
			}()
			began := time.Now()
			time.Sleep(time.Second) // the flood fills the listener

			client := &http.Client{Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			var lat []time.Duration
			failed := 0
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				resp, err := client.Get("http://" + addr + "/")
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					failed++
				}
				lat = append(lat, time.Since(t0))
				time.Sleep(100 * time.Millisecond)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(failed)/float64(b.N), "failed/scrape")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Milliseconds()), "p99-ms")
			b.ReportMetric(float64(answered.Load())/time.Since(began).Seconds(), "attacker-answered/s")
			b.Logf("%s: %d of %d scrapes failed; attacker answered %d", policy, failed, b.N, answered.Load())
		})
	}
}
