package kernelname

import (
	"fmt"
	"syscall"
	"testing"
	"time"
)

// The costliest names check admits (worstAdmitted). check's doc cites these figures.
func BenchmarkCheckedWorst(b *testing.B) {
	for _, c := range []struct{ runs, pad int }{{1, 300}, {1, 500}, {3, 300}} {
		s := worstAdmitted(c.runs, c.pad)
		if r := check(s); r != "" {
			b.Fatalf("worstAdmitted(%d, %d) refused: %s", c.runs, c.pad, r)
		}
		b.Run(fmt.Sprintf("depth=%d/%dB", 16*c.runs, len(s)), func(b *testing.B) {
			loopCPU(b, func() { Short(s) })
		})
	}
}

// The costliest pack expansion check admits (worstPackAdmitted), and PyTorch's torch.randn
// kernel, whose copy count (1,152) the bound once refused. check's doc cites these figures.
func BenchmarkCheckedPack(b *testing.B) {
	b.Run("pack", func(b *testing.B) {
		s := worstPackAdmitted()
		loopCPU(b, func() { Short(s) })
	})
	b.Run("randn", func(b *testing.B) {
		loopCPU(b, func() { Short(randnKernel) })
	})
}

// check alone, on a 1 KiB name: what a refused name costs.
func BenchmarkCheck(b *testing.B) {
	s := hostileShapes[0].make(160)[:1024]
	b.SetBytes(int64(len(s)))
	loopCPU(b, func() { check(s) })
}

// loopCPU runs f in b.Loop and reports the process's CPU time per op (the collector's
// included) beside the wall time, which on a shared machine also counts waiting for a CPU.
func loopCPU(b *testing.B, f func()) {
	var ru syscall.Rusage
	cpu := func() time.Duration {
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
}
