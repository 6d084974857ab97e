package activity

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ianlancetaylor/demangle"
)

// maxKernelNameLen bounds the length of a shortened kernel name in bytes.
const maxKernelNameLen = 120

// maxDemangleLen is the longest name that is demangled. The demangler's cost grows with
// the square (or worse) of a name's nesting depth: a hostile 2 KiB name of nested pointer
// types took 35 ms, a 4 KiB one over 100 ms, against about 1 ms at this length. Longer
// names are shortened as text.
const maxDemangleLen = 1024

// maxShortenInput bounds the bytes of a name that are read at all: a label keeps 120 bytes,
// and names from the socket are at most 4 KiB (wire.MaxString); only recordings carry
// longer ones.
const maxShortenInput = 4096

// maxDemangledLen caps the demangler's output (2^12 bytes), of which 120 are kept.
const maxDemangledLen = 12

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
// bounded the same way; so do mangled names over 1 KiB, which are not demangled. Only the
// first 4 KiB of a name are read. An empty name becomes "unknown". The cost is linear in
// the bytes read, except for the demangler's, which the 1 KiB bound caps.
func ShortKernelName(mangled string) string {
	name := cutRunes(mangled, maxShortenInput)
	if len(name) <= maxDemangleLen {
		if d, err := demangle.ToString(name, demangle.NoParams, demangle.NoClones, demangle.MaxLength(maxDemangledLen)); err == nil {
			name = d
		}
	}
	name = stripNested(name)
	name = strings.ToValidUTF8(name, "?")
	if name == "" {
		return "unknown"
	}
	return truncate(name, maxKernelNameLen)
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

// maxCachedNames bounds the shortened names a nameCache keeps (about 200 bytes each: the
// key is a hash, never the mangled name).
const maxCachedNames = 2 * maxTrackedNames

// nameCache remembers the short names of mangled names, so that each is shortened once and
// never under the Aggregator's lock: the connection's goroutine shortens new names before
// it takes the lock. Keys are seeded hashes, so a hostile name cannot be made to collide
// with another. Safe for concurrent use.
type nameCache struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]string
}

func newNameCache() *nameCache {
	return &nameCache{seed: maphash.MakeSeed(), m: make(map[uint64]string)}
}

// short returns ShortKernelName(mangled), computing it without holding any lock when it is
// not cached. When full the cache starts over.
func (c *nameCache) short(mangled string) string {
	k := maphash.String(c.seed, mangled)
	c.mu.Lock()
	s, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return s
	}
	s = ShortKernelName(mangled)
	c.mu.Lock()
	if len(c.m) >= maxCachedNames {
		clear(c.m)
	}
	c.m[k] = s
	c.mu.Unlock()
	return s
}
