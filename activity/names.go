package activity

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/ianlancetaylor/demangle"
)

// maxKernelNameLen bounds the length of a shortened kernel name in bytes.
const maxKernelNameLen = 120

// ShortKernelName turns a kernel name as CUPTI reports it (usually an Itanium-mangled C++
// name) into a short, readable label value:
//
//   - the name is demangled without function parameters (_Z4busyPfii -> busy);
//   - template arguments are kept one level deep only, and anything nested inside them
//     (templates, parameter lists) is dropped, so
//     cutlass::Kernel<cutlass::gemm::kernel::Gemm<...>> becomes
//     cutlass::Kernel<cutlass::gemm::kernel::Gemm>;
//   - parameter lists of enclosing functions are dropped ({lambda(int)#1} -> {lambda#1});
//   - the result is cut to 120 bytes, ending in "...".
//
// Names that are not mangled (e.g. cuBLAS's ampere_sgemm_128x64_nn) keep their text,
// bounded the same way. An empty name becomes "unknown".
func ShortKernelName(mangled string) string {
	name := mangled
	if d, err := demangle.ToString(mangled, demangle.NoParams, demangle.NoClones); err == nil {
		name = d
	}
	name = stripNested(name)
	name = strings.ToValidUTF8(name, "?")
	if name == "" {
		return "unknown"
	}
	return truncate(name, maxKernelNameLen)
}

// stripNested keeps text at template depth 0 and 1 and drops what is nested deeper, as well
// as the contents of every parenthesised list.
func stripNested(s string) string {
	if !strings.ContainsAny(s, "<(") {
		return s
	}
	b := make([]byte, 0, len(s))
	angle, paren := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
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
		case c == '<' && !isOperatorChar(s, i):
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

// isOperatorChar reports whether the '<' at i belongs to an operator name (operator<, operator<<).
func isOperatorChar(s string, i int) bool {
	j := i
	for j > 0 && s[j-1] == '<' {
		j--
	}
	return strings.HasSuffix(s[:j], "operator")
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
