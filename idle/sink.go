package idle

import (
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// smActive reports whether a Perfworks name is an SM active ratio in percent of peak.
func smActive(name string) bool {
	return strings.Contains(name, "sm__cycles_active") && strings.HasSuffix(name, ".pct_of_peak_sustained_elapsed")
}

// Add takes a PM batch (a sink beside the aggregator): a batch whose SM active mean, weighted
// by sample duration, reaches the threshold is activity. Batches without an SM active metric
// say nothing (NVML and the activity records decide alone). It never blocks on NVML.
func (c *Controller) Add(b pmdata.Batch) {
	j := -1
	for i, name := range b.Metrics {
		if smActive(name) {
			j = i
			break
		}
	}
	if j < 0 || len(b.Samples) == 0 {
		return
	}
	var sum, dur float64
	for _, s := range b.Samples {
		if s.End <= s.Start || j >= len(s.Values) {
			continue
		}
		d := float64(s.End - s.Start)
		sum += s.Values[j] * d
		dur += d
	}
	if dur == 0 || sum/dur < c.cfg.smThreshold {
		return
	}
	c.mu.Lock()
	c.mark(b.Device, time.Unix(0, int64(b.Samples[0].Start)), time.Unix(0, int64(b.Samples[len(b.Samples)-1].End)), "pm_sm_active")
	c.signals[b.Device].pmBusy = true
	c.mu.Unlock()
}

var _ activity.Listener = (*Controller)(nil)

// ProcessConnected is a sign of activity on each GPU of a traced process: it has created its
// CUDA context and will launch work.
func (c *Controller) ProcessConnected(p *record.Process, info activity.ProcessInfo) {
	idx := make([]int, len(info.GPUs))
	now := c.cfg.now()
	c.mu.Lock()
	for i, label := range info.GPUs {
		d, ok := c.byLabel[label]
		if !ok {
			d = -1
		}
		idx[i] = d
		if d >= 0 {
			c.mark(d, now, now, "process_connected")
		}
	}
	c.procs[p] = idx
	c.mu.Unlock()
	c.poke()
}

// Records marks each GPU that ran a kernel, memcpy or memset in recs.
func (c *Controller) Records(p *record.Process, recs []record.Record) {
	marked := false
	c.mu.Lock()
	idx := c.procs[p]
	for _, r := range recs {
		if int(r.Device) >= len(idx) || idx[r.Device] < 0 || r.End < r.Start {
			continue
		}
		what := "kernel_record"
		if r.Kind != record.KindKernel {
			what = "copy_record"
		}
		c.mark(idx[r.Device], time.Unix(0, int64(r.Start)), time.Unix(0, int64(r.End)), what)
		marked = true
	}
	c.mu.Unlock()
	if marked {
		c.poke()
	}
}

var _ activity.LaunchListener = (*Controller)(nil)

// Launched marks every GPU of a traced process that submitted work after a quiet spell, from
// the time of the call: the hint names no device, so waking all of the process's GPUs costs a
// retake at most where the guess was wrong. It arrives within about a quiet flush (20 ms) of
// the call, before the work's own records.
func (c *Controller) Launched(p *record.Process, at uint64) {
	t := time.Unix(0, int64(at))
	marked := false
	c.mu.Lock()
	for _, d := range c.procs[p] {
		if d >= 0 {
			c.mark(d, t, t, "launch")
			marked = true
		}
	}
	c.mu.Unlock()
	if marked {
		c.poke()
	}
}

// Coverage is not a sign of activity (a traced process reports spans while idle too).
func (c *Controller) Coverage(*record.Process, []record.Interval) {}

// ProcessDisconnected forgets the process.
func (c *Controller) ProcessDisconnected(p *record.Process) {
	c.mu.Lock()
	delete(c.procs, p)
	c.mu.Unlock()
}
