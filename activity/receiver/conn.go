package receiver

import (
	"errors"
	"io"
	"os"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// connBaseBytes is what every connection is charged before its first byte: its goroutine's
// stack, the decoder's 64 KiB read buffer and the small state around them.
const connBaseBytes = 96 << 10

// connShare: one connection may hold at most 1/connShare of the budget, so that a few
// clients with huge name tables cannot take all of it.
const connShare = 16

// identityShare: the connections of one verified identity (a container) may hold at most
// 1/identityShare of the budget together (at least 16 MiB), so that one workload's many
// connections cannot take it all either.
const identityShare = 4

// errBudget ends a connection whose next frame would pass the receiver's memory budget.
var errBudget = errors.New("activity receiver memory budget reached")

// serveConn serves one connection and forgets it when done. Until its hello the connection
// has the hello timeout as read deadline.
func (s *Server) serveConn(cs *connState) {
	defer s.untrack(cs)
	if err := cs.c.SetReadDeadline(time.Now().Add(s.cfg.helloTimeout)); err != nil {
		s.connError(cs, nil, err)
		return
	}
	s.decode(cs.c, cs)
}

// decode reads one connection's frames until goodbye, EOF or an error, feeding the
// aggregator; the process it announced is disconnected on return. cs is nil in benchmarks.
// Everything the connection's decoder and hello hold is charged to the budget and released
// on return.
func (s *Server) decode(r io.Reader, cs *connState) {
	var (
		p       *record.Process
		m       wire.Message
		drops   = make(map[string]uint64, wire.NumDropReasons)
		dec     = wire.NewDecoder(r)
		charged int64
		// warned: a refused drop report was logged on this connection
		warned bool
	)
	share := max(s.cfg.budget.Limit()/connShare, 4<<20)
	idShare := max(s.cfg.budget.Limit()/identityShare, 16<<20)
	var id *identityState
	if cs != nil {
		id = cs.id
	}
	reserve := func(n int) error {
		if charged+int64(n) > share || id != nil && id.bytes.Load()+int64(n) > idShare || !s.cfg.budget.Reserve(int64(n)) {
			return errBudget
		}
		charged += int64(n)
		if id != nil {
			id.bytes.Add(int64(n))
		}
		if cs != nil {
			cs.charged.Store(charged)
		}
		return nil
	}
	if s.cfg.budget != nil {
		dec.SetReserve(reserve)
	}
	defer func() {
		if p != nil {
			s.agg.Disconnect(p)
		}
		s.cfg.budget.Release(charged)
		if id != nil {
			id.bytes.Add(-charged)
		}
	}()
	for {
		err := dec.ReadInto(&m)
		if err != nil {
			s.connError(cs, p, err)
			return
		}
		if cs != nil {
			cs.last.Store(time.Now().UnixNano())
		}
		switch m.Type {
		case wire.FrameHello:
			proc := m.Process
			if !s.checkHello(cs, &proc) {
				return
			}
			if err := reserve(helloBytes(&proc)); err != nil {
				s.connError(cs, &proc, err)
				return
			}
			p = &proc
			if cs != nil {
				cs.hello.Store(true)
				if err := cs.c.SetReadDeadline(time.Time{}); err != nil {
					s.connError(cs, p, err)
					return
				}
			}
			s.agg.Connect(p)
			s.log.Debug("activity process connected", "pid", p.PID, "identity", p.Identity, "executable", p.Executable, "pod", p.Pod)
		case wire.FrameRecords:
			s.agg.Add(p, s.screenRecords(m.Records))
		case wire.FrameCoverage:
			s.agg.Coverage(p, s.screenCoverage(m.Coverage, lifeOf(p, cs)))
		case wire.FrameLaunch:
			if m.Launch.Time > latest() {
				s.agg.InvalidReport("launch_ahead") // it would wake the GPU's PM session until then
				continue
			}
			s.agg.Launched(p, m.Launch.Time)
		case wire.FrameDrops, wire.FrameGoodbye:
			for i, v := range m.Drops {
				drops[wire.DropReason(i).String()] = v
			}
			if err := s.agg.SenderDrops(p, drops); err != nil && !warned {
				warned = true // once per connection: a hostile sender cannot flood the log
				s.log.Warn("activity drop counters refused", "pid", p.PID, "err", err)
			}
			if m.Type == wire.FrameGoodbye {
				if cs != nil {
					cs.counted.Store(true) // an ordinary end: an eviction from now on costs nothing
				}
				s.log.Debug("activity process said goodbye", "pid", p.PID, "sent_records", m.SentRecords)
				return
			}
		}
	}
}

// maxAhead is how far past the exporter's clock a time a sender reports may be: CUPTI reports
// a kernel after it has ended, and its clock follows the system's, which a step may move.
const maxAhead = time.Minute

// latest is the latest time (ns since the epoch) a sender may report now.
func latest() uint64 { return uint64(time.Now().Add(maxAhead).UnixNano()) }

// screenRecords removes from recs, in place, the records that end after latest(), counted
// as ends_ahead: a kernel is reported after it ends, so these are made up (or of another
// time base), and one would hold its GPU busy for the idle controller until then. The
// Aggregator checks the rest against the sender's life.
func (s *Server) screenRecords(recs []record.Record) []record.Record {
	limit := latest()
	kept := recs[:0]
	for _, r := range recs {
		if r.End <= limit {
			kept = append(kept, r)
		}
	}
	if n := len(recs) - len(kept); n > 0 {
		s.agg.DroppedRecords("ends_ahead", uint64(n))
	}
	return kept
}

// lifeOf is when the process of p began, as far as the receiver can tell: its start time
// (the kernel's when verified), else when its connection was accepted.
func lifeOf(p *record.Process, cs *connState) uint64 {
	switch {
	case p.StartTime != 0:
		return p.StartTime
	case cs != nil:
		return uint64(cs.opened.UnixNano())
	}
	return 0
}

// screenCoverage removes from spans, in place, those that end after latest() or last
// longer than the process has lived since start (activity.LifeSpan), counted as
// coverage_implausible: traced seconds are node-wide, and one made-up span added 1.6e10.
func (s *Server) screenCoverage(spans []record.Interval, start uint64) []record.Interval {
	limit := latest()
	now := uint64(time.Now().UnixNano())
	kept := spans[:0]
	for _, sp := range spans {
		if sp.End <= limit && sp.End-sp.Start <= activity.LifeSpan(start, now, sp.End) {
			kept = append(kept, sp)
			continue
		}
		s.agg.InvalidReport("coverage_implausible")
	}
	return kept
}

// errNoPeer: a connection served without a socket (benchmarks) has no peer to ask.
var errNoPeer = errors.New("no peer credentials")

// checkHello refuses what a hello may not claim (sanitizeHello) and checks who it is against
// the kernel (verify), counting each refusal once. It reports whether the connection may go
// on: not when the kernel contradicts the hello's pid or start time.
func (s *Server) checkHello(cs *connState, p *record.Process) bool {
	pe := peer{err: errNoPeer}
	if cs != nil {
		pe = cs.peer
	}
	claimed := *p
	bad := sanitizeHello(p)
	if len(bad) > 0 {
		for _, claim := range bad {
			s.agg.ClaimRefused(claim, activity.ClaimInvalid)
		}
		s.warn.Warn("invalid_hello", "activity hello: claims refused as invalid text", "claims", bad, "pid", pe.pid)
	}
	if claim := verify(pe, p); claim != "" {
		s.agg.IdentityRefused(claim)
		s.drop(cs, "identity_refused")
		s.warn.Warn("identity_refused", "activity connection refused: the kernel contradicts its hello",
			"claim", claim, "peer_pid", pe.pid, "hello_pid", claimed.PID, "hello_start_time", claimed.StartTime, "peer_start_time", pe.proc.startTime)
		return false
	}
	if p.Identity == record.IdentityClaimed && p.StartTime != 0 && !s.startPlausible(p.StartTime) {
		// Nothing checks a claimed start time, but it bounds what the process may report
		// (activity.MaxSenderRecordRate): one before the node booted or in the future is none.
		p.StartTime = 0
		s.agg.ClaimRefused(claimStartTime, activity.ClaimInvalid)
		s.warn.Warn("invalid_hello", "activity hello: claims refused as invalid text", "claims", []string{claimStartTime}, "pid", pe.pid)
	}
	return true
}

// startPlausible says whether a process could have started at t (ns since the epoch): after
// the node booted (when /proc says when) and not in the future.
func (s *Server) startPlausible(t uint64) bool {
	if t > latest() {
		return false
	}
	btime, err := s.ident.boot.get(s.cfg.procRoot)
	return err != nil || t >= btime*1_000_000_000
}

// helloBytes is the memory a process's hello holds for the life of its connection.
func helloBytes(p *record.Process) int {
	n := 256 + len(p.Executable) + len(p.Cgroup) + len(p.Pod) + len(p.Namespace) + len(p.Container)
	for _, u := range p.DeviceUUIDs {
		n += 16 + len(u)
	}
	return n
}

// connError counts and logs the end of a connection that did not say goodbye (an eviction
// was counted when it happened, by evictConnLocked).
func (s *Server) connError(cs *connState, p *record.Process, err error) {
	var pid uint32
	if p != nil {
		pid = p.PID
	}
	switch {
	case cs != nil && cs.evicted.Load() != nil:
		reason := *cs.evicted.Load()
		s.warn.Warn(reason, "activity connection closed to make room for a new one", "reason", reason, "pid", pid)
	case errors.Is(err, errBudget):
		s.drop(cs, "memory_budget")
		s.warn.Warn("memory_budget", "activity connection closed: receiver memory budget reached",
			"pid", pid, "budget_bytes", s.cfg.budget.Limit(), "err", err)
	case errors.Is(err, io.EOF):
		s.log.Debug("activity connection closed without goodbye", "pid", pid)
	case wire.IsMalformed(err):
		s.drop(cs, "malformed")
		s.warn.Warn("malformed", "activity connection dropped: malformed frame", "pid", pid, "err", err)
	case s.isClosed():
		// Close unblocked the read.
	case p == nil && errors.Is(err, os.ErrDeadlineExceeded):
		s.drop(cs, "hello_timeout")
		s.warn.Warn("hello_timeout", "activity connection closed: no hello in time", "timeout", s.cfg.helloTimeout)
	default:
		s.drop(cs, "read_error")
		s.warn.Warn("read_error", "activity connection dropped: read error", "pid", pid, "err", err)
	}
}
