// Package testutil holds the helpers that the tests of several packages share: waiting for a
// condition, a buffer several goroutines write, a free loopback port. Only tests import it.
package testutil

import (
	"bytes"
	"net"
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

// FreeAddr returns a loopback address with a port nobody listens on (now).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
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
