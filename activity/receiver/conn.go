package receiver

import (
	"errors"
	"io"
	"net"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// serveConn serves one connection and forgets it when done.
func (s *Server) serveConn(c net.Conn) {
	defer s.untrack(c)
	s.decode(c)
}

// decode reads one connection's frames until goodbye, EOF or an error, feeding the
// aggregator; the process it announced is disconnected on return.
func (s *Server) decode(r io.Reader) {
	var (
		p     *activity.Process
		m     wire.Message
		drops = make(map[string]uint64, wire.NumDropReasons)
		dec   = wire.NewDecoder(r)
		// warned: a refused drop report was logged on this connection
		warned bool
	)
	defer func() {
		if p != nil {
			s.agg.Disconnect(p)
		}
	}()
	for {
		err := dec.ReadInto(&m)
		if err != nil {
			s.connError(p, err)
			return
		}
		switch m.Type {
		case wire.FrameHello:
			proc := m.Process
			p = &proc
			s.agg.Connect(p)
			s.log.Debug("activity process connected", "pid", p.PID, "executable", p.Executable, "pod", p.Pod)
		case wire.FrameRecords:
			s.agg.Add(p, m.Records)
		case wire.FrameCoverage:
			s.agg.Coverage(p, m.Coverage)
		case wire.FrameDrops, wire.FrameGoodbye:
			for i, v := range m.Drops {
				drops[wire.DropReason(i).String()] = v
			}
			if err := s.agg.SenderDrops(p, drops); err != nil && !warned {
				warned = true // once per connection: a hostile sender cannot flood the log
				s.log.Warn("activity drop counters refused", "pid", p.PID, "err", err)
			}
			if m.Type == wire.FrameGoodbye {
				s.log.Debug("activity process said goodbye", "pid", p.PID, "sent_records", m.SentRecords)
				return
			}
		}
	}
}

// connError counts and logs the end of a connection that did not say goodbye.
func (s *Server) connError(p *activity.Process, err error) {
	var pid uint32
	if p != nil {
		pid = p.PID
	}
	switch {
	case errors.Is(err, io.EOF):
		s.log.Debug("activity connection closed without goodbye", "pid", pid)
	case wire.IsMalformed(err):
		s.agg.ConnectionDropped("malformed")
		s.log.Warn("activity connection dropped: malformed frame", "pid", pid, "err", err)
	case s.isClosed():
		// Close unblocked the read.
	default:
		s.agg.ConnectionDropped("read_error")
		s.log.Warn("activity connection dropped: read error", "pid", pid, "err", err)
	}
}
