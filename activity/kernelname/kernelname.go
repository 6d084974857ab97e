// Package kernelname turns kernel names as CUPTI reports them (usually Itanium-mangled C++
// names) into short label values, with a bound on the work any name can cause.
//
// A mangled name is demangled only when a linear scan of its bytes (check, in scan.go)
// shows none of the shapes on which the demangler's cost grows exponentially, and the
// shapes on which it grows with the square of the length are small; otherwise, or when a
// Budget of demangling CPU time is spent, it is shortened as text and the reason is
// returned for the caller to count.
package kernelname

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/ianlancetaylor/demangle"
)

// MaxLen bounds the length of a label in bytes.
const MaxLen = 120

// maxInput bounds the bytes of a name that are read at all: a label keeps 120 bytes,
// and names from the socket are at most 4 KiB (wire.MaxString); only recordings carry
// longer ones.
const maxInput = 4096

// maxDemangledLen caps the demangler's output (2^12 bytes), of which 120 are kept.
const maxDemangledLen = 12

// Short turns a kernel name into a short, readable label value:
//
//   - the name is demangled without function parameters (_Z4busyPfii -> busy);
//   - template arguments are kept one level deep only, and anything nested inside them
//     (templates, parameter lists) is dropped, so
//     cutlass::Kernel<cutlass::gemm::kernel::Gemm<...>> becomes
//     cutlass::Kernel<cutlass::gemm::kernel::Gemm>;
//   - parameter lists of enclosing functions are dropped ({lambda(int)#1} -> {lambda#1});
//   - control characters (C0 including NUL, DEL, C1) and invalid UTF-8 become '?';
//   - the result is cut to 120 bytes, ending in "...".
//
// Names that are not Itanium-mangled (cuBLAS's ampere_sgemm_128x64_nn) keep their text,
// bounded the same way; so do mangled names that check refuses, and reason then says why
// (one of Reasons; "" when the name was demangled or is not mangled). Only the first 4 KiB
// of a name are read. An empty name becomes "unknown".
func Short(mangled string) (label, reason string) {
	return short(mangled, nil)
}

func short(mangled string, b *Budget) (string, string) {
	name := cutRunes(mangled, maxInput)
	reason := ""
	if strings.HasPrefix(name, "_Z") {
		reason = check(name)
		if reason == "" && b != nil && !b.allow() {
			reason = OverBudget
		}
		if reason == "" {
			name = demangled(name, b)
		}
	}
	return label(name), reason
}

// demangled returns the demangled form of a name check admitted, or the name itself when
// it is not valid; with a budget, the CPU time it took is charged to it.
func demangled(name string, b *Budget) string {
	var d string
	var err error
	run := func() {
		d, err = demangle.ToString(name, demangle.NoParams, demangle.NoClones, demangle.MaxLength(maxDemangledLen))
	}
	if b != nil {
		b.charge(threadCPUTime(run))
	} else {
		run()
	}
	if err != nil {
		return name
	}
	return d
}

// label bounds a (demangled or text) name to a label value.
func label(name string) string {
	name = stripNested(name)
	name = clean(name)
	if name == "" {
		return "unknown"
	}
	return truncate(name, MaxLen)
}

// clean replaces invalid UTF-8 (each run of invalid bytes) and control characters (C0
// including NUL, ESC, CR and LF; DEL; C1) by '?', in linear time: dashboards, log pipelines
// and terminals must not see them in a label.
func clean(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) { // printable ASCII, as nearly every name
		return s
	}
	s = strings.ToValidUTF8(s, "?")
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '?'
		}
		return r
	}, s)
}

func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r < 0xa0
}

// stripNested keeps text at template depth 0 and 1 and drops what is nested deeper, as well
// as the contents of every parenthesised list. It reads each byte once.
func stripNested(s string) string {
	if !strings.ContainsAny(s, "<(") {
		return s
	}
	b := make([]byte, 0, len(s))
	angle, paren := 0, 0
	operatorRun := false // the run of '<' that ends at i-1 follows "operator"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '<' && (i == 0 || s[i-1] != '<') {
			operatorRun = strings.HasSuffix(s[:i], "operator")
		}
		switch {
		case c == '(':
			paren++
			continue
		case c == ')':
			if paren > 0 {
				paren--
			}
			continue
		case paren > 0:
			continue
		case c == '<' && !operatorRun: // operator< and operator<< are names, not brackets
			angle++
			if angle == 1 {
				b = append(b, c)
			}
			continue
		case c == '>' && angle > 0:
			if angle == 1 {
				b = append(bytes.TrimRight(b, " "), c) // "Gemm<...> >" -> "Gemm>"
			}
			angle--
			continue
		}
		if angle <= 1 {
			b = append(b, c)
		}
	}
	return strings.TrimSpace(string(b))
}

// cutRunes returns the first n bytes of s at most, cut on a rune boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return cutRunes(s, n-3) + "..."
}
