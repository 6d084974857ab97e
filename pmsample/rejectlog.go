package pmsample

import (
	"log/slog"
	"sync"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/guard"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// rejectLog logs the guard's rejections with everything needed to find their cause, at a
// bounded rate: the first rejectBurst of a device, then one per rejectEvery with the number
// left unlogged in between (every one is counted in the self-metrics regardless).
type rejectLog struct {
	mu      sync.Mutex // the double pipeline reports from its evaluator thread
	logged  int
	last    time.Time
	skipped int
}

const (
	rejectBurst = 20
	rejectEvery = 10 * time.Second
)

// sampleDescriber is a device that can say where the sample being evaluated sits (its index
// in the counter data image, the image's counts, the decode): the CUPTI one.
type sampleDescriber interface{ describeSample() []any }

func (l *rejectLog) report(log *slog.Logger, pm pmDevice, b *pmdata.Batch, start, end uint64, vals []float64, bad int) {
	l.mu.Lock()
	now := time.Now()
	if l.logged >= rejectBurst && now.Sub(l.last) < rejectEvery {
		l.skipped++
		l.mu.Unlock()
		return
	}
	skipped := l.skipped
	l.logged++
	l.last, l.skipped = now, 0
	l.mu.Unlock()
	args := []any{"failed", guard.Failed(b.Metrics, bad), "start_ns", start, "end_ns", end,
		"span", time.Duration(end - start), "values", append([]float64(nil), vals...),
		"metrics", b.Metrics, "unlogged_before", skipped}
	if n := len(b.Samples); n > 0 {
		p := b.Samples[n-1]
		args = append(args, "prev_start_ns", p.Start, "prev_end_ns", p.End, "prev_values", p.Values)
	}
	if d, ok := pm.(sampleDescriber); ok {
		args = append(args, d.describeSample()...)
	}
	log.Warn("pm sample rejected: a value or span the hardware cannot produce", args...)
}
