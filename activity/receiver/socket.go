package receiver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/internal/tick"
)

// DefaultSocketCheck is how often the server checks that its socket file is still there.
const DefaultSocketCheck = 5 * time.Second

// WithSocketCheck sets how often the server checks that the socket file at its path is the
// one it listens on; a file removed (a cleanup of the directory) or replaced (another
// process bound the path) is re-created, logged and counted
// (cupti_activity_socket_recreations_total), since no new process could connect until then.
// Default 5 s; a non-positive value keeps the default.
func WithSocketCheck(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.checkEvery = d
		}
	}
}

// socketFile is the socket file the server listens on, and the problem with it, if any.
type socketFile struct {
	info    fs.FileInfo
	problem string // why the path does not reach the server now; "" when it does
}

// SocketProblem says why new processes cannot connect now (the socket file was removed or
// replaced and could not be re-created yet); "" when they can.
func (s *Server) SocketProblem() string {
	if f := s.file.Load(); f != nil {
		return f.problem
	}
	return ""
}

// watchSocket checks the socket file every checkEvery until ctx ends or the server closes.
func (s *Server) watchSocket(ctx context.Context) {
	t := tick.New(s.cfg.checkEvery) // on the exporter's timetable (internal/tick): no wake-up of its own
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if s.isClosed() {
				return
			}
			s.checkSocket()
		}
	}
}

// checkSocket compares the file at the path with the one the server listens on and, when
// it was removed or replaced, listens anew on the path.
func (s *Server) checkSocket() {
	cur := s.file.Load()
	fi, err := os.Lstat(s.path)
	var what string
	switch {
	case errors.Is(err, fs.ErrNotExist):
		what = "removed"
	case err != nil:
		s.warn.Warn("socket_check", "checking the activity socket file failed", "path", s.path, "err", err)
		return
	case os.SameFile(fi, cur.info):
		return
	default:
		what = "replaced"
	}
	if cur.problem == "" { // first seen: count it once
		s.agg.SocketRecreated(what)
		s.log.Warn("activity socket file "+what+": re-creating it; processes started since could not connect",
			"path", s.path)
	}
	if what == "replaced" {
		if fi.Mode().Type() != fs.ModeSocket {
			s.file.Store(&socketFile{info: cur.info, problem: fmt.Sprintf("activity socket %s was replaced by a file that is not a socket: remove it", s.path)})
			s.log.Error("activity socket path is no longer a socket; not removing it", "path", s.path, "mode", fi.Mode())
			return
		}
		if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.file.Store(&socketFile{info: cur.info, problem: fmt.Sprintf("activity socket %s was replaced and cannot be removed: %v", s.path, err)})
			return
		}
	}
	ln, file, err := listen(s.path, s.cfg)
	if err != nil {
		s.file.Store(&socketFile{info: cur.info, problem: fmt.Sprintf("activity socket %s was %s and cannot be re-created: %v", s.path, what, err)})
		s.log.Error("re-creating the activity socket failed", "path", s.path, "err", err)
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return
	}
	old := s.ln.Swap(ln)
	s.file.Store(file)
	s.mu.Unlock()
	old.SetUnlinkOnClose(false) // its file is gone or another's: keep the new one
	old.Close()
	s.log.Info("activity socket re-created", "path", s.path)
}

// drainMax bounds what is read from a refused connection: about the kernel's socket buffer.
const drainMax = 256 << 10

// refuse closes a connection the server will not serve, counted as reason. The records the
// sender already wrote (queued in the socket before the accept) would be lost without a
// trace: the sender counts only what it fails to write. They are read without waiting and
// counted (cupti_activity_dropped_records_total{reason="refused_connection"}); what the
// sender writes later fails and is counted by it (queue_full, on its next connection).
// Refusals share one buffer (s.drain, under s.drainMu): a flood of them cannot make the
// receiver hold a buffer each.
func (s *Server) refuse(c net.Conn, reason string) {
	if uc, ok := c.(*net.UnixConn); ok {
		s.drainMu.Lock()
		defer s.drainMu.Unlock()
		if s.drain == nil {
			s.drain = make([]byte, drainMax)
		}
		n := 0
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Read(func(fd uintptr) bool {
				for n < len(s.drain) {
					m, _, err := syscall.Recvfrom(int(fd), s.drain[n:], syscall.MSG_DONTWAIT)
					if m <= 0 || err != nil {
						break
					}
					n += m
				}
				return true // never wait
			})
		}
		if recs := wire.CountRecords(s.drain[:n]); recs > 0 {
			s.agg.DroppedRecords("refused_connection", recs)
		}
	}
	c.Close()
	s.agg.ConnectionDropped(reason)
}
