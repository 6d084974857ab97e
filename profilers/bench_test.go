package profilers

import "testing"

// BenchmarkPoll is what one look at the host's processes costs: over a fake /proc of 500
// processes when no PID was handed out (a quiet host: /proc/loadavg alone), when one was (the
// new process read), and over this machine's own /proc (listings/op: the share of polls that
// listed it, pids-read/op: the PIDs read one by one). Before the PID counter's range was read
// (it listed /proc at every new PID), new-pid cost 245 µs on the 2-core build machine.
func BenchmarkPoll(b *testing.B) {
	h := &fakeHost{t: &testing.T{}, root: b.TempDir(), last: 100}
	h.loadavg()
	for range 500 {
		h.start("python3", []string{"python3", "train.py"}, map[string]string{"PATH": "/usr/bin"})
	}
	r, c := twoGPUs(), newClock()
	b.Run("quiet", func(b *testing.B) {
		w := watcher(h, r, c)
		c.add(2 * youngFor) // none young any more
		for b.Loop() {
			w.Poll()
		}
	})
	b.Run("new-pid", func(b *testing.B) {
		w := watcher(h, r, c)
		c.add(2 * youngFor)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			pid := h.start("sleep", []string{"sleep", "1"}, nil)
			b.StartTimer()
			w.Poll()
			b.StopTimer()
			h.exit(pid)
			c.add(2 * youngFor)
			w.Poll()
			b.StartTimer()
		}
	})
	b.Run("host-proc", func(b *testing.B) {
		w := New(nil)
		w.Drive(r)
		n0, p0 := w.scans, w.probes
		for b.Loop() {
			w.Poll()
		}
		b.ReportMetric(float64(w.scans-n0)/float64(b.N), "listings/op")
		b.ReportMetric(float64(w.probes-p0)/float64(b.N), "pids-read/op")
		b.ReportMetric(float64(len(w.known)), "processes")
	})
}
