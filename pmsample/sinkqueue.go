package pmsample

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// sinkQueueLen is how many batches a device's queue holds: 6.4 s of decodes at the default
// period, far more than a scrape or a lock holds the consumers up.
const sinkQueueLen = 64

// sinkQueue hands a device's batches to the sink on a goroutine of its own, so that what the
// sink waits for (the aggregator's and the attributor's locks, held by scrapes and by
// activity records) never delays the next decode: a late decode loses samples to a full
// counter data image. Batches keep their order. A full queue blocks the device thread
// (nothing is dropped) and the time it blocked is reported with the next late decode.
type sinkQueue struct {
	ch      chan pmdata.Batch
	done    sync.WaitGroup
	blocked atomic.Int64 // ns put waited for room since the last takeBlocked
}

func newSinkQueue(sink func(pmdata.Batch)) *sinkQueue {
	q := &sinkQueue{ch: make(chan pmdata.Batch, sinkQueueLen)}
	q.done.Go(func() {
		for b := range q.ch {
			sink(b)
		}
	})
	return q
}

// put enqueues b; it blocks only while the queue is full.
func (q *sinkQueue) put(b pmdata.Batch) {
	select {
	case q.ch <- b:
	default:
		t0 := time.Now()
		q.ch <- b
		q.blocked.Add(int64(time.Since(t0)))
	}
}

// takeBlocked returns and clears the time put waited since the previous call (0 on nil).
func (q *sinkQueue) takeBlocked() time.Duration {
	if q == nil {
		return 0
	}
	return time.Duration(q.blocked.Swap(0))
}

// close delivers what is queued and returns when the sink has taken the last batch.
func (q *sinkQueue) close() {
	close(q.ch)
	q.done.Wait()
}
