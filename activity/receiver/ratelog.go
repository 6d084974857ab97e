package receiver

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// limitedLog writes at most one warning per reason per period; the next line it writes for
// a reason says how many it suppressed in between. Hostile or broken clients can make the
// receiver refuse thousands of connections a second: each is counted in a metric, and the
// log stays readable.
type limitedLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	reasons map[string]*logState
}

type logState struct {
	last       time.Time
	suppressed uint64
}

// Warn logs msg with args under reason, unless a line of that reason went out less than a
// period ago.
func (l *limitedLog) Warn(reason, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	if l.reasons == nil {
		l.reasons = make(map[string]*logState)
	}
	st := l.reasons[reason]
	if st == nil {
		st = &logState{}
		l.reasons[reason] = st
	}
	if !st.last.IsZero() && now.Sub(st.last) < l.every {
		st.suppressed++
		l.mu.Unlock()
		return
	}
	n := st.suppressed
	st.last, st.suppressed = now, 0
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "suppressed", n)
	}
	if l.log == nil || !l.log.Enabled(context.Background(), slog.LevelWarn) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:]) // the caller of Warn, for the log's source
	r := slog.NewRecord(now, slog.LevelWarn, msg, pcs[0])
	r.Add(args...)
	_ = l.log.Handler().Handle(context.Background(), r)
}
