package activity

// Benchmarks of kernel-name shortening on hostile and realistic names. This file depends on
// nothing but ShortKernelName, so that it runs as it is on the code before demangling was
// bounded, for side-by-side figures (docs/security.md).

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// castOperators is the name whose demangling doubled its cost every 8 bytes: at k=40 (325
// bytes) it never ended, pinning a core and holding SIGTERM.
func castOperators(k int) string {
	return "_Z" + strings.Repeat("NcvT_I", k) + "2u0" + strings.Repeat("EE", k)
}

// hostileShape makes a mangled name of one of the shapes on which the old demangling cost
// grew faster than the name's length; k sets the size.
type hostileShape struct {
	name string
	make func(k int) string
	k    []int // sizes benchmarked one name at a time
	k2MB int   // the size flooded in BenchmarkShortKernelName2MB
}

var hostileShapes = []hostileShape{
	{"cast_operators", castOperators, []int{10, 14, 16, 40}, 40},
	{"template_copies", func(k int) string {
		s := "_ZZ1fIiEv1cIT_T_E"
		for i := range k {
			ref := "S" + base36(2*i+3) + "_"
			s += "1cI" + ref + ref + "E"
		}
		return s + "E1x"
	}, []int{10, 12, 14, 85}, 85},
	{"nested_lambdas", func(k int) string {
		s := "1fv"
		for range k {
			s = "Z" + s + "EUlvE_"
		}
		return "_Z" + s
	}, []int{40, 145}, 145},
	{"nested_pointers", func(k int) string { return "_Z1fI" + strings.Repeat("P", k) + "iEv" }, []int{1016}, 1016},
	{"nested_templates", func(k int) string { return "_Z1f" + strings.Repeat("I1a", k) + strings.Repeat("E", k) + "v" }, []int{254}, 254},
	{"nested_names", func(k int) string { return "_ZN" + strings.Repeat("1a", k) + "Ev" }, []int{509}, 509},
	{"substitutions", func(k int) string { return "_Z1fI1a" + strings.Repeat("S_", k) + "Ev" }, []int{507}, 507},
	{"big_substitutions", func(k int) string { // references to the biggest entry
		s := "_Z1fI" + strings.Repeat("P", k) + "i"
		for ref := "S" + base36(k-1) + "_"; len(s)+len(ref)+2 <= 1024 && strings.Count(s, "S") < 64; {
			s += ref
		}
		return s + "Ev"
	}, []int{760}, 760},
	{"pack_expansion", func(k int) string {
		return "_ZZ1fIJ" + strings.Repeat("i", k) + "EEvDp" + strings.Repeat("P", 980-k) + "T_E1x"
	}, []int{300}, 300},
}

func base36(n int) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 36 {
		b = append([]byte{digits[n%36]}, b...)
	}
	return string(b)
}

// processCPU is the CPU time of the whole process (GC workers included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs f in b.Loop and reports the process's CPU time per op beside the wall time:
// on a shared machine the wall time also counts waiting for a CPU.
func loopCPU(b *testing.B, f func()) {
	start := processCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}

// Per name, the hostile shapes at several sizes. The code before bounded demangling ran
// cast_operators k=40 and template_copies k=85 for ever; run it with
// -bench 'Hostile/(cast_operators|template_copies)/k=1[0246]/'.
func BenchmarkShortKernelNameHostile(b *testing.B) {
	for _, c := range hostileShapes {
		for _, k := range c.k {
			s := c.make(k)
			b.Run(fmt.Sprintf("%s/k=%d/%dB", c.name, k, len(s)), func(b *testing.B) {
				loopCPU(b, func() { ShortKernelName(s) })
			})
		}
	}
}

// 2 MB of names of each hostile shape in one op: the target is under 50 ms of CPU in all.
func BenchmarkShortKernelName2MB(b *testing.B) {
	for _, c := range hostileShapes {
		s := c.make(c.k2MB)
		b.Run(c.name, func(b *testing.B) {
			loopCPU(b, func() {
				for n := 0; n < 2<<20; n += len(s) {
					ShortKernelName(s)
				}
			})
		})
	}
}

// The realistic kernel names of activity/kernelname/testdata, all of them in one op: they
// cost what they cost before.
func BenchmarkShortKernelNameRealistic(b *testing.B) {
	f, err := os.Open("kernelname/testdata/kernelnames.tsv")
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, _, _ := strings.Cut(sc.Text(), "\t"); !strings.HasPrefix(name, "#") {
			names = append(names, name)
		}
	}
	f.Close()
	loopCPU(b, func() {
		for _, s := range names {
			ShortKernelName(s)
		}
	})
}
