package activity

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/activity/kernelname"
)

func TestShortKernelName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"_Z4busyPfii", "busy"},
		{"_ZN3foo3barEv", "foo::bar"},
		{"ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"},
		{"", "unknown"},
		{ // PyTorch: nested template arguments dropped
			"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
			"at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor, at::detail::Array>",
		},
		{ // CUTLASS: the kernel's own template argument stays, its arguments go
			"_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEEEEEEEEvNT_6ParamsE",
			"cutlass::Kernel<cutlass::gemm::kernel::Gemm>",
		},
		{ // PyTorch lambdas: enclosing parameter lists dropped
			"_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE8_clEvEUlfE_EEvS4_RKT_EUliE_EEviT1_",
			"at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast::{lambda#1}>",
		},
		{"_ZN3fooltI3barEEvv", "foo::operator< <bar>"}, // operator< is not a template bracket
	} {
		if got := ShortKernelName(tc.in); got != tc.want {
			t.Errorf("ShortKernelName(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestShortKernelNameBounded(t *testing.T) {
	long := strings.Repeat("very_long_kernel_name_", 20) + "é"
	got := ShortKernelName(long)
	if len(got) > maxKernelNameLen || !strings.HasSuffix(got, "...") {
		t.Errorf("ShortKernelName of %d bytes = %q (%d bytes), want <= %d ending in ...", len(long), got, len(got), maxKernelNameLen)
	}
	if got := ShortKernelName("bad\xffname"); got != "bad?name" {
		t.Errorf("invalid UTF-8 kept: %q", got)
	}
}

// Hostile names cost what plain names of the same length cost: shortening reads each byte a
// bounded number of times (a 4 KiB name of '<' took 2.8 ms against 6 µs for a plain one when
// every '<' walked back over the ones before it). Counted in bytes compared, not in time.
func TestStripNestedLinear(t *testing.T) {
	plain := testing.Benchmark(func(b *testing.B) { benchmarkShort(b, strings.Repeat("a", 4096)) })
	for _, s := range []string{strings.Repeat("<", 4096), "operator" + strings.Repeat("<", 4088), strings.Repeat("(", 4096)} {
		hostile := testing.Benchmark(func(b *testing.B) { benchmarkShort(b, s) })
		// A loose factor: the quadratic version was 470x slower; a loaded CI runner varies 2-3x.
		if ratio := float64(hostile.NsPerOp()) / float64(plain.NsPerOp()); ratio > 25 {
			t.Errorf("ShortKernelName(%.12q... of %d bytes) costs %v, %.0fx a plain name of the same length (%v)",
				s, len(s), time.Duration(hostile.NsPerOp()), ratio, time.Duration(plain.NsPerOp()))
		}
	}
}

// The longest name demangled, and the bytes of a name read at all (activity/kernelname).
const maxDemangleLen, maxShortenInput = 1024, 4096

// Names longer than the demangler is trusted with are shortened as text, and whatever the
// input, at most 4 KiB of it is read.
func TestShortKernelNameBoundsInput(t *testing.T) {
	nested := "_ZN" + strings.Repeat("1a", maxDemangleLen) + "Ev" // demangles to a::a::...; 2 KiB
	if got := ShortKernelName(nested); !strings.HasPrefix(got, "_ZN1a1a") {
		t.Errorf("a mangled name of %d bytes was demangled: %q", len(nested), got)
	}
	short := "_ZN" + strings.Repeat("1a", 100) + "Ev"
	if got := ShortKernelName(short); !strings.HasPrefix(got, "a::a::") {
		t.Errorf("a mangled name of %d bytes was not demangled: %q", len(short), got)
	}
	huge := strings.Repeat("x", 512<<10)
	r := testing.Benchmark(func(b *testing.B) { benchmarkShort(b, huge) })
	plain := testing.Benchmark(func(b *testing.B) { benchmarkShort(b, huge[:maxShortenInput]) })
	if ratio := float64(r.NsPerOp()) / float64(plain.NsPerOp()); ratio > 10 {
		t.Errorf("a 512 KiB name costs %.0fx a 4 KiB one: more than its first 4 KiB is read", ratio)
	}
}

func benchmarkShort(b *testing.B, s string) {
	for b.Loop() {
		ShortKernelName(s)
	}
}

// Benchmarks of the worst shapes found: the cost per byte of each against a plain name.
func BenchmarkShortKernelName(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"plain_4KiB", strings.Repeat("a", 4096)},
		{"lt_4KiB", strings.Repeat("<", 4096)},
		{"operator_lt_4KiB", "operator" + strings.Repeat("<", 4088)},
		{"nested_names_1KiB", "_ZN" + strings.Repeat("1a", 509) + "Ev"},
		{"nested_pointers_1KiB", "_Z1fI" + strings.Repeat("P", 1012) + "iEv"},
		{"substitutions_1KiB", "_Z1fI1a" + strings.Repeat("S_", 507) + "Ev"},
		{"cutlass", "_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEEEEEEEEvNT_6ParamsE"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			benchmarkShort(b, c.s)
		})
	}
}

// The Aggregator shortens names outside its lock: while another goroutine holds it (a
// scrape's rebuild, another connection), a connection still shortens its batch's new names.
func TestNamesShortenedOutsideLock(t *testing.T) {
	a := NewAggregator()
	recs := make([]record.Record, 200)
	for i := range recs {
		id := fmt.Sprint(i)
		recs[i] = record.Record{Kind: record.KindKernel, Start: 1, End: 2, Name: fmt.Sprintf("_Z%dk%sv", 1+len(id), id)}
	}
	done := make(chan *[]kernelName)
	a.mu.Lock()
	go func() { done <- a.kernelNames(recs) }()
	var names *[]kernelName
	select {
	case names = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("kernelNames waited for the Aggregator's lock")
	}
	a.mu.Unlock()
	for i, n := range *names {
		if want := ShortKernelName(recs[i].Name); n.short != want {
			t.Fatalf("short name %d = %q, want %q", i, n.short, want)
		}
	}
}

// The k=40 name is shortened as text at once, and the Aggregator counts it. (Before, Add
// never returned: this test failed by the 10 s below.)
func TestHostileKernelNameCounted(t *testing.T) {
	a := NewAggregator()
	p := &record.Process{PID: 1, DeviceUUIDs: []string{"GPU-0"}}
	name := castOperators(40)
	done := make(chan struct{})
	go func() {
		a.Add(p, []record.Record{{Kind: record.KindKernel, Start: 1, End: 2, Name: name}})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // it returns in microseconds; this only catches a hang
		t.Fatal("Add of a 325-byte kernel name did not return in 10 s")
	}
	s := a.Snapshot()
	want := name[:maxKernelNameLen-3] + "..."
	if got := kernelNames(t, s); !slices.Contains(got, want) {
		t.Errorf("kernel labels %q, want %q", got, want)
	}
	if v := mustSample(t, s, "cupti_activity_kernel_names_not_demangled_total", kernelname.CastOperators).Value; v != 1 {
		t.Errorf("not demangled (cast_operators) = %v, want 1", v)
	}
	for _, r := range kernelname.Reasons {
		mustSample(t, s, "cupti_activity_kernel_names_not_demangled_total", r)
	}
}

// Past the demangling budget, names are shortened as text, counted, and not cached: the
// next time, with budget, the same name is demangled.
func TestNameCacheBudget(t *testing.T) {
	c := newNameCache()
	c.budget = kernelname.NewBudget(0, 0) // empty, never refilled
	const name = "_ZN3foo3barEv"
	if got := c.name(name).short; got != name {
		t.Fatalf("over budget: %q, want the text", got)
	}
	if got := c.name(name).short; got != name {
		t.Fatalf("over budget again: %q, want the text", got)
	}
	if n := c.notDemangled[slices.Index(kernelname.Reasons, kernelname.OverBudget)].Load(); n != 2 {
		t.Errorf("counted %d over budget, want 2", n)
	}
	c.budget = kernelname.NewBudget(time.Second, 0)
	if got := c.name(name).short; got != "foo::bar" {
		t.Fatalf("with budget: %q, want foo::bar (the text was cached)", got)
	}
}
