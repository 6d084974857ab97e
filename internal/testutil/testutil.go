// Package testutil holds the helpers that the tests of several packages share: waiting for a
// condition, a loop run until the test ends, a buffer several goroutines write, a free
// loopback port, the address an exporter's listener got. Only tests import it.
package testutil

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"
)

// WaitFor checks cond every poll until it holds, and fails the test once timeout has passed
// without it.
func WaitFor(t testing.TB, what string, timeout, poll time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(poll)
	}
}

// Running is a loop started by RunUntilCleanup.
type Running struct {
	exited chan struct{}
	err    error
}

// RunUntilCleanup runs run(ctx) in a goroutine for the rest of the test. The test's cleanup
// cancels ctx and waits for run to return (10 s at most, then it fails the test), and fails
// the test with the error run returned. A test that must know whether run ended early (a
// server that failed to start) selects on Exited.
func RunUntilCleanup(t testing.TB, run func(context.Context) error) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{exited: make(chan struct{})}
	go func() {
		defer close(r.exited)
		r.err = run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.exited:
			if r.err != nil {
				t.Errorf("run: %v", r.err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return within 10 s of its context's end")
		}
	})
	return r
}

// Exited is closed once run has returned.
func (r *Running) Exited() <-chan struct{} { return r.exited }

// FreeAddr returns a loopback address with a port nobody listens on (now). The port is
// drawn below Linux's ephemeral range (32768 up), which the kernel hands to every outgoing
// connection and ":0" listener: a port from there is often taken again before the process
// it was found for binds it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(32768-20000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	t.Fatal("no free loopback port in 20000-32767 after 100 tries")
	return ""
}

// SyncBuffer is a buffer that goroutines may write at once (a process's or a logger's
// output) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Process is a command a test started; Start ends it when the test ends.
type Process struct {
	done chan struct{}
	err  error
}

// Start starts cmd and, when the test ends, interrupts it, kills it if it is still running 10 s
// later, and then calls after (nil: nothing), for instance to show its output on failure.
func Start(t testing.TB, cmd *exec.Cmd, after func()) *Process {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	p := &Process{done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-p.done
		}
		if after != nil {
			after()
		}
	})
	return p
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit error (cmd.Wait's) once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// webListener is the exporter's log line on its main listener's limits (exporter/server.go),
// with the address it got.
var webListener = regexp.MustCompile(`msg="HTTP listener limits" listener=web address=(\S+)`)

// WebAddr is the address an exporter started with --web.listen-address=127.0.0.1:0 got, from
// its log; "" until the listener is open.
func WebAddr(log []byte) string {
	if m := webListener.FindSubmatch(log); m != nil {
		return string(m[1])
	}
	return ""
}
