package receiver

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
)

// shortLivedUnderLoad runs one round of the measurement: while clients of this process
// keep about queued connections waiting in the socket's backlog, n short-lived processes
// (hello with their true start time, 100 records, goodbye, exit at once) connect. It returns
// how many of them the receiver verified from the kernel, and how many were only claimed (their
// /proc entry was gone when the receiver looked).
func shortLivedUnderLoad(tb testing.TB, n, queued int, opts ...Option) (verified, claimed int) {
	var tap connTap
	agg := activity.NewAggregator(activity.WithListener(&tap))
	path := filepath.Join(tb.TempDir(), "activity.sock")
	srv, err := NewServer(path, agg, nil, append([]Option{WithProcRoot("/proc")}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	defer func() { cancel(); <-served }()

	// The load: 4 dialers keep up to `queued` connections open (the receiver refuses or evicts
	// them: they are one identity past its limit, or silent), dialling on until the end.
	var (
		stop   atomic.Bool
		dialed atomic.Int64
		wg     sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for !stop.Load() {
				c, err := net.Dial("unix", path)
				if err != nil {
					time.Sleep(time.Millisecond) // the backlog is full
					continue
				}
				dialed.Add(1)
				held = append(held, c)
				if len(held) > queued/4 {
					held[0].Close()
					held = held[1:]
				}
			}
		})
	}
	for dialed.Load() < int64(queued) {
		time.Sleep(time.Millisecond)
	}
	pids := map[uint32]bool{}
	var kids []*exec.Cmd
	for range n {
		kids = append(kids, startHelper(tb, "short", path, "CX_RECEIVER_LIFE="+os.Getenv("CX_SHORT_LIFE")))
	}
	for _, k := range kids {
		if err := k.Wait(); err != nil {
			tb.Errorf("short-lived helper: %v", err)
		}
		pids[uint32(k.Process.Pid)] = true
	}
	// Each helper's connection is judged once the receiver reaches it.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		verified, claimed = 0, 0
		tap.mu.Lock()
		for _, p := range tap.procs {
			switch {
			case p.Identity == activity.IdentityVerified && pids[p.PID]:
				verified++
			case p.Identity == activity.IdentityClaimed && p.Executable == "/helper":
				claimed++
			}
		}
		tap.mu.Unlock()
		if verified+claimed >= n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	return verified, claimed
}

// BenchmarkShortLivedUnderLoad measures how many of 32 short-lived honest processes the
// receiver verifies while 3,000 connections of another client are queued (the issue: 15 of
// 32; the rest were only claimed). verified/32 is the figure; run with -benchtime=5x.
// CX_SHORT_LIFE (a duration) is how long each process lives after its hello (default none:
// it exits right after its goodbye).
func BenchmarkShortLivedUnderLoad(b *testing.B) {
	for _, fallback := range []bool{false, true} {
		name := "pidfd"
		var opts []Option
		if fallback {
			name, opts = "fallback", []Option{withoutPeerPidfd()}
		} else if !peerPidfdSupported() {
			continue
		}
		b.Run(name, func(b *testing.B) {
			var v, c int
			for b.Loop() {
				verified, claimed := shortLivedUnderLoad(b, 32, 3000, opts...)
				v += verified
				c += claimed
			}
			b.ReportMetric(float64(v)/float64(b.N), "verified/32")
			b.ReportMetric(float64(c)/float64(b.N), "claimed/32")
			b.ReportMetric(0, "ns/op")
		})
	}
}
