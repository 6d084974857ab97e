package receiver

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// shortLivedBehindQueue runs one round of the measurement: another process has queued
// connections waiting in the socket's backlog (silent: the receiver evicts or refuses them),
// and n processes connect behind them and say hello (with their true start time). Then the
// receiver starts accepting, and the n processes exit life later, after 100 records and a
// goodbye (reaped at once, as by a launcher). It returns how many of the n the receiver
// verified from the kernel and how many were only claimed (their /proc entry was gone by the
// time it had identified the connections queued ahead), and how long it took to reach all n.
func shortLivedBehindQueue(tb testing.TB, n, queued int, life time.Duration, opts ...Option) (verified, claimed int, judged time.Duration) {
	var tap connTap
	agg := activity.NewAggregator(activity.WithListener(&tap))
	path := filepath.Join(tb.TempDir(), "activity.sock")
	srv, err := NewServer(path, agg, nil, append([]Option{WithProcRoot("/proc")}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	defer srv.Close()
	load := startHelper(tb, "flood", path, fmt.Sprint("CX_RECEIVER_QUEUED=", queued))
	defer func() { load.Process.Kill(); load.Wait() }()
	pids := map[uint32]bool{}
	var reaped sync.WaitGroup
	defer reaped.Wait()
	var lives []func()
	for range n {
		k, live := startShort(tb, path, life)
		pids[uint32(k.Process.Pid)] = true
		lives = append(lives, live)
		reaped.Go(func() { k.Wait() }) // reaped as soon as it exits, as a launcher does: no zombie to read
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { srv.Serve(ctx); close(served) }()
	defer func() { cancel(); <-served }()
	for _, live := range lives {
		live()
	}
	t0 := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		verified, claimed = 0, 0
		tap.mu.Lock()
		for _, p := range tap.procs {
			switch {
			case p.Identity == record.IdentityVerified && pids[p.PID]:
				verified++
			case p.Identity == record.IdentityClaimed && p.Executable == "/helper":
				claimed++
			}
		}
		tap.mu.Unlock()
		if verified+claimed >= n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return verified, claimed, time.Since(t0)
}

// BenchmarkShortLivedUnderLoad measures how many of 32 short-lived honest processes the
// receiver verifies when 3,000 connections of another process are queued ahead of them (the
// issue: 15 of 32 under such a load; the rest were only claimed), for processes that live 100
// ms, 300 ms and 1 s after the receiver starts accepting: verified/32 is the figure, and
// judged-ms how long the receiver took to identify the 3,000 connections ahead and reach the
// 32 (run with -benchtime=3x).
func BenchmarkShortLivedUnderLoad(b *testing.B) {
	for _, fallback := range []bool{false, true} {
		name := "pidfd"
		var opts []Option
		if fallback {
			name, opts = "fallback", []Option{withoutPeerPidfd()}
		} else if !peerPidfdSupported() {
			continue
		}
		for _, life := range []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
			b.Run(fmt.Sprintf("%s/life=%s", name, life), func(b *testing.B) {
				var v, c int
				var took time.Duration
				for b.Loop() {
					verified, claimed, judged := shortLivedBehindQueue(b, 32, 3000, life, opts...)
					v, c, took = v+verified, c+claimed, took+judged
				}
				b.ReportMetric(float64(v)/float64(b.N), "verified/32")
				b.ReportMetric(float64(c)/float64(b.N), "claimed/32")
				b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "judged-ms")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// waitLine reads a line from a helper's standard output.
func waitLine(tb testing.TB, r *bufio.Reader) {
	tb.Helper()
	if _, err := r.ReadString('\n'); err != nil {
		tb.Fatalf("helper: %v", err)
	}
}
