package kernelname

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"
)

// maxShortCPU is what one Short call may cost before FuzzShort fails. check admits no name
// whose demangling grows faster than quadratically with its length, capped at 1 KiB: the
// costliest admitted name found takes about 2 ms of CPU (BenchmarkCheckedWorst, on a
// 2-core machine loaded 10 to 20 times over), refused ones microseconds. The time measured
// is the thread's CPU time, which does not grow while the runner waits for a CPU, and a
// call over the limit is measured twice more, failing only if every run is over: a loaded
// CI machine slows a call by its cache misses, not 25 times.
const maxShortCPU = 50 * time.Millisecond

// maxShortWall is how long FuzzShort waits for a call that does not return (the 325-byte
// name of nested conversion operators never did).
const maxShortWall = 5 * time.Second

// FuzzShort fails when a name makes Short cost more than maxShortCPU, or gives a label
// that is empty, over 120 bytes, invalid UTF-8 or holds control characters.
func FuzzShort(f *testing.F) {
	for _, c := range hostileShapes {
		f.Add(c.make(c.k))
		f.Add(c.make(c.k / 4))
	}
	for _, runs := range []int{2, 4} {
		f.Add(worstAdmitted(runs, 500))
	}
	f.Add(worstPackAdmitted())
	if b, err := os.ReadFile("testdata/realnames.txt"); err == nil {
		for _, name := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(name, "#") {
				f.Add(name)
			}
		}
	}
	if file, err := os.Open("testdata/kernelnames.tsv"); err == nil {
		sc := bufio.NewScanner(file)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if name, _, _ := strings.Cut(sc.Text(), "\t"); !strings.HasPrefix(name, "#") {
				f.Add(name)
			}
		}
		file.Close()
	}
	f.Fuzz(func(t *testing.T, name string) {
		var label, reason string
		var spent time.Duration
		done := make(chan struct{})
		go func() {
			spent = threadCPUTime(func() { label, reason = Short(name) })
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(maxShortWall):
			t.Fatalf("Short of %d bytes did not return in %v: %q", len(name), maxShortWall, name)
		}
		for i := 0; i < 2 && spent > maxShortCPU; i++ {
			spent = min(spent, threadCPUTime(func() { Short(name) }))
		}
		if spent > maxShortCPU {
			t.Fatalf("Short of %d bytes took %v of CPU (limit %v): %q", len(name), spent, maxShortCPU, name)
		}
		checkLabel(t, name, label, reason)
	})
}
