package kernelname

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ianlancetaylor/demangle"
)

// Realistic kernel names keep the labels they had before demangling was bounded.
func TestShortRealistic(t *testing.T) {
	f, err := os.Open("testdata/kernelnames.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		mangled, want, _ := strings.Cut(sc.Text(), "\t")
		got, reason := Short(mangled)
		if got != want {
			t.Errorf("Short(%.60q...)\n got %q\nwant %q", mangled, got, want)
		}
		if wantReason := map[bool]string{true: TooLong, false: ""}[len(mangled) > maxDemangleLen]; reason != wantReason {
			t.Errorf("Short(%.60q...) reason %q, want %q", mangled, reason, wantReason)
		}
		n++
	}
	if n < 40 {
		t.Fatalf("read %d names", n)
	}
}

// Every hostile shape is refused by check, so it is shortened as text with its reason.
// Before, cast_operators at k=40 and template_copies at k=90 never returned.
func TestShortHostile(t *testing.T) {
	for _, c := range hostileShapes {
		s := c.make(c.k)
		done := make(chan [2]string, 1)
		go func() {
			label, reason := Short(s)
			done <- [2]string{label, reason}
		}()
		select {
		case r := <-done:
			if want := truncate(s, MaxLen); r[0] != want || r[1] != c.reason {
				t.Errorf("%s (%d bytes): Short = %q, %q, want %q, %q", c.name, len(s), r[0], r[1], want, c.reason)
			}
		case <-time.After(10 * time.Second): // it returns in microseconds; this only catches a hang
			t.Fatalf("%s (%d bytes): Short did not return in 10 s", c.name, len(s))
		}
	}
}

// Labels never carry control characters (C0 with NUL, ESC, CR, LF; DEL; C1) or invalid
// UTF-8, whether the name is text or a mangled name whose identifiers hold them.
func TestShortControlCharacters(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"k\x00e\x1b[31mr\rn\ne\tl\x7f", "k?e?[31mr?n?e?l?"},
		{"c1\u0085\u009b\u0080x", "c1???x"},
		{"_Z4a\x1b\x00bv", "a??b"},             // demangled: the identifier's bytes are copied
		{"_ZN3a\rb1cEv", "a?b::c"},             // in a nested name
		{"bad\xffname\xfe\xfd", "bad?name?"},   // each run of invalid bytes
		{"\u00e9\u0100 ok", "\u00e9\u0100 ok"}, // printable non-ASCII stays
	} {
		got, _ := Short(tc.in)
		if got != tc.want {
			t.Errorf("Short(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The linear scan's counts: a byte read as part of an identifier can only count more.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"one cv", "_ZN1acvT_IiEEv", ""},
		{"two cv", "_ZN1acvNS_1bcvT_EEv", CastOperators},
		{"TL is a template parameter only before a number", "_ZN3TLS1aIT_EES0_S0_S0_S0_S0_S0_S0_S0_S0_S0_S0_S0_S0_S0_S0_v", ""},
		{"16 copies of one entry", "_ZZ1fIiEvPT_" + strings.Repeat("S1_", 15) + "E1x", ""},
		{"copies of four entries, growth 8^4", "_ZZ1fIiEvPT_" + strings.Repeat("S1_", 7) + strings.Repeat("S2_", 7) + strings.Repeat("S3_", 7) + strings.Repeat("S4_", 7) + "E1x", ""},
		{"copies grow by the product: 9 × 8^3", "_ZZ1fIiEvPT_" + strings.Repeat("S1_", 8) + strings.Repeat("S2_", 7) + strings.Repeat("S3_", 7) + strings.Repeat("S4_", 7) + "E1x", TemplateCopies},
		{"12 entries copied once", "_ZZ1fIiEvPT_S1_S2_S3_S4_S5_S6_S7_S8_S9_SA_SB_SC_E1x", ""},
		{"13 entries copied once", "_ZZ1fIiEvPT_S1_S2_S3_S4_S5_S6_S7_S8_S9_SA_SB_SC_SD_E1x", TemplateCopies},
		{"references before a template parameter copy nothing", "_ZZ1fIiEv" + strings.Repeat("S_", 20) + "T_E1x", ""},
		{"one reference per run of letters", "_ZZ1fIiEvT_NSSSSSSSSSSSSSSSSSS_1aEE1x", ""},
		{"sp outside an expression", "_ZN8cusparse1kIiEEvT_", ""},
		{"sp after an expression may start, no argument pack", "_ZN1A6sparseIiEEvT_", ""},
		{"sp after an expression may start, an argument pack", "_ZN1AIJ" + strings.Repeat("i", 190) + "EE6sparseIiEEvT_", PackExpansions},
		{"Dp and a template parameter, a small pack", "_ZZ1fIJiEEvDpT_E1x", ""},
		{"a pack of 160 arguments expanded", "_ZZ1fIJ" + strings.Repeat("i", 160) + "EEvDpT_E1x", ""},
		{"a pack of 190 arguments expanded", "_ZZ1fIJ" + strings.Repeat("i", 190) + "EEvDpT_E1x", PackExpansions},
		{"a long pattern", "_ZZ1fIJ" + strings.Repeat("i", 100) + "EEvDp" + strings.Repeat("PK", 50) + "T_E1x", PackExpansions},
		{"a reference after the expansion may name a large tree", "_ZZ1fIJiiEEvDpT_" + strings.Repeat("S1_", 20) + "E1x", PackExpansions},
		{"Dp without a template parameter", "_ZZ1fIJiEEvDpiE1x", ""},
		{"8 local names", "_Z" + strings.Repeat("Z", 7) + "1fv" + strings.Repeat("E1a", 7), ""},
		{"9 local names", "_Z" + strings.Repeat("Z", 8) + "1fv" + strings.Repeat("E1a", 8), LocalNames},
		{"run of 16 qualifiers", "_Z1fI" + strings.Repeat("P", 16) + "iEv", ""},
		{"run of 17 qualifiers", "_Z1fI" + strings.Repeat("P", 17) + "iEv", Nesting},
		{"64 qualifiers", "_Z1fI" + strings.Repeat("PKPKPKPKPKPKPKP1a", 4) + "PKPKEv", ""},
		{"65 qualifiers", "_Z1fI" + strings.Repeat("PKPKPKPKPKPKPKP1a", 4) + "PKPKPEv", Nesting},
		{"a chain of 128 names", "_ZN" + strings.Repeat("1a", 128) + "Ev", ""},
		{"a chain of 129 names", "_ZN" + strings.Repeat("1a", 129) + "Ev", Nesting},
		{"a literal is not a name", "_ZN1aILi9999999999EEE" + strings.Repeat("1a", 128) + "v", ""},
		{"over 1 KiB", "_ZN" + strings.Repeat("1a", 511) + "Ev", TooLong},
	} {
		if got := check(tc.in); got != tc.want {
			t.Errorf("%s: check(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	b := NewBudget(10*time.Millisecond, 5*time.Millisecond)
	b.now, b.last = func() time.Time { return now }, now
	const name = "_ZN3foo3barEv"
	if got, reason := b.Short(name); got != "foo::bar" || reason != "" {
		t.Fatalf("full budget: %q, %q", got, reason)
	}
	b.charge(time.Second) // spent: 1 s of debt
	if got, reason := b.Short(name); got != name || reason != OverBudget {
		t.Fatalf("spent budget: %q, %q, want the text and %q", got, reason, OverBudget)
	}
	if got, reason := b.Short("ampere_sgemm_128x64_nn"); got != "ampere_sgemm_128x64_nn" || reason != "" {
		t.Fatalf("a name that is not mangled is not counted: %q, %q", got, reason)
	}
	now = now.Add(200 * time.Second) // refills 1 s, and at most to 10 ms
	if got, reason := b.Short(name); got != "foo::bar" || reason != "" {
		t.Fatalf("refilled budget: %q, %q", got, reason)
	}
	if b.tokens > 10*time.Millisecond {
		t.Fatalf("tokens %v over the capacity", b.tokens)
	}
	var spent time.Duration
	for range 3 {
		spent += threadCPUTime(func() { Short(hostileShapes[6].make(600)) })
	}
	if spent <= 0 {
		t.Fatal("the thread CPU clock measured nothing")
	}
}

// Invariants of every label, for the tests and the fuzz target.
func checkLabel(t *testing.T, in, label, reason string) {
	t.Helper()
	if label == "" || len(label) > MaxLen || !utf8.ValidString(label) || strings.ContainsFunc(label, isControl) {
		t.Fatalf("Short(%q) = %q: empty, over %d bytes, invalid UTF-8 or control characters", in, label, MaxLen)
	}
	if reason != "" && !slices.Contains(Reasons, reason) {
		t.Fatalf("Short(%q): unknown reason %q", in, reason)
	}
}

// randnKernel is the kernel of torch.randn (float) as CUPTI reported it on an H100 (run BU of
// docs/gpu-validation.md, where the copy bound of the time refused it).
const randnKernel = "_ZN2at6native54_GLOBAL__N__d8ceb000_21_DistributionNormal_cu_0c5b6e8543distribution_elementwise_grid_stride_kernelIfLi4EZNS0_9templates4cuda20normal_and_transformIffPNS_17CUDAGeneratorImplEZZZNS4_13normal_kernelIS7_EEvRKNS_10TensorBaseEddT_ENKUlvE_clEvENKUlvE0_clEvEUlfE_EEvRNS_18TensorIteratorBaseET1_T2_EUlP24curandStatePhilox4_32_10E0_ZNS1_27distribution_nullary_kernelIff6float4S7_SM_SF_EEvSH_SJ_RKT3_T4_EUlifE_EEvlNS_15PhiloxCudaStateESI_SJ_"

// realNamesRefused are the names of testdata/realnames.txt check refuses, by their start.
var realNamesRefused = map[string]string{
	"_ZN2at6native51_GLOBAL__N__67b3c33b_18_DepthwiseConv2d_cu_2ee6150b39conv_depthwise2d_forward_kernel_": TemplateCopies,
	"_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIN4cute5tupleIJiiiiEEENS1_10collective13Col": TooLong,
	"_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalINS1_17GroupProblemShapeIN4cute5tupleIJiiiE": TooLong,
}

// Real kernel names are demangled: every one of testdata/realnames.txt but the few
// realNamesRefused lists (3 over 1 KiB, one copy growth of 62,208). Before, 38 of the 325
// were refused (31 template_copies, 7 pack_expansions: torch.randn's kernel, AMP's unscale,
// fused Adam, the foreach ops). Two use manglings the demangler does not know (an old
// nvcc lambda, a newer template parameter kind) and keep their text.
func TestShortRealNames(t *testing.T) {
	b, err := os.ReadFile("testdata/realnames.txt")
	if err != nil {
		t.Fatal(err)
	}
	n, refused := 0, 0
	for _, name := range strings.Split(string(b), "\n") {
		if name == "" || strings.HasPrefix(name, "#") {
			continue
		}
		n++
		label, reason := Short(name)
		want := ""
		for prefix, r := range realNamesRefused {
			if strings.HasPrefix(name, prefix) {
				want = r
			}
		}
		if reason != want {
			t.Errorf("Short(%.100q...): reason %q, want %q", name, reason, want)
		}
		if reason != "" {
			refused++
		} else if _, err := demangle.ToString(name); err == nil && strings.HasPrefix(label, "_Z") {
			t.Errorf("Short(%.100q...) = %q: not demangled", name, label)
		}
	}
	if n != 325 || refused != 4 {
		t.Errorf("read %d names, %d refused; want 325 and 4", n, refused)
	}
	if label, reason := Short(randnKernel); reason != "" || !strings.HasPrefix(label, "at::native::::distribution_elementwise_grid_stride_kernel<float, 4") {
		t.Errorf("torch.randn's kernel: %q, %q", label, reason)
	}
}
