package kernelname

import "strings"

// Why a mangled name was shortened as text instead of demangled (the values of the
// reason label of cupti_activity_kernel_names_not_demangled_total).
const (
	TooLong        = "too_long"        // over 1 KiB
	CastOperators  = "cast_operators"  // more than one possible conversion operator ("cv")
	TemplateCopies = "template_copies" // substitutions copying template parameters
	PackExpansions = "pack_expansions" // pack expansions whose copies could pass maxPackWork
	LocalNames     = "local_names"     // nested local names or lambdas
	Substitutions  = "substitutions"   // more substitution references than realistic names have
	Nesting        = "nesting"         // nesting or pointer chains deeper than realistic names
	OverBudget     = "budget"          // the Budget of demangling CPU time is spent
)

// Reasons lists every reason Short and Budget.Short return.
var Reasons = []string{TooLong, CastOperators, TemplateCopies, PackExpansions, LocalNames, Substitutions, Nesting, OverBudget}

// Limits of check. The length, casts, local names and lambdas (and maxCopyGrowth and the
// pack-expansion rule) bound the demangler's work (see check); the others keep hostile names
// that it would demangle at a millisecond or more from costing more per byte than realistic
// names do. Realistic names (testdata/kernelnames.tsv: PyTorch, CUTLASS, CUB, Thrust,
// cuSPARSE, FlashAttention, vLLM, AMReX) have at most 5 'Z', 4 "Ul", no "cv", a copy growth
// of 12, a nesting of 16, runs of 2 qualifiers and 13 in all, chains of 5 names and a
// substitution every 10 bytes; of the 29,907 mangled names of LLVM's demangler tests
// (general C++), check admits all but 57. testdata/realnames.txt (325 kernel names from
// public profiler output, PyTorch's random, AMP, fused-optimizer and foreach kernels among
// them) has copy growths up to 62,208 by copyTargets' count and pack work up to 20,300:
// all but 4 are admitted (3 over 1 KiB, one growth of 62,208).
const (
	maxDemangleLen    = 1024
	maxCasts          = 1
	maxLocalNames     = 8
	maxLambdas        = 8
	maxDepth          = 32
	maxQualifierRun   = 16
	maxQualifiers     = 64
	maxNameChain      = 128
	minBytesPerSubstn = 8
	maxPackWork       = 32768
)

// check reads a mangled name once and returns "" when it may be demangled, else the
// reason it may not. Counts are taken over every byte, identifiers included: a byte the
// demangler reads as part of an identifier can only make a count larger than what the
// demangler meets, so each bound below holds whatever the name.
//
// github.com/ianlancetaylor/demangle parses by recursive descent, and its work grows faster
// than the length only in these places:
//
//   - Backtracking, in demangleCastTemplateArgs: after a conversion operator ("cv") it tries
//     template arguments and parses them again when the try fails, so k nested conversion
//     operators parse the innermost text 2^k times ("_Z" + "NcvT_I"×k + "2u0" + "EE"×k took
//     42 ms of CPU at k=14, 117 bytes, doubling every 8 bytes; k=40 never ends). At most one
//     "cv": at most two passes.
//   - Substitution references (S_, S<seq>_) copy the referenced tree, and the copy is new
//     wherever it holds a template parameter (T_, T<n>_, TL<n>_), so references that each
//     copy two earlier ones double the tree: _ZZ1fIiEv1cIT_T_E1cIS3_S3_E... took 0.18 s of
//     CPU at 160 bytes, doubling every 10. Copies make new nodes only once a template
//     parameter was read, and an entry holds no copy made after it, so the references read
//     after the first template parameter grow the tree at most prod(1 + references to t)
//     times over their targets t (copyTargets): at most 4,096. The count takes every
//     reference after the first template parameter as a copy, though most copy nothing
//     (their targets hold none): PyTorch's torch.randn kernel counts 1,152 and demangles in
//     0.4 ms; the doubling shape above at 3^7 costs 0.04-0.4 ms, at 3^12 33 ms.
//   - Pack expansions (Dp, and sp in an expression) are expanded in simplify once per
//     argument of their pack, copying their pattern each time: a 256-byte name took 14 ms,
//     1 KiB 0.3 s. A pack is found only through a template parameter, its arguments are
//     written between J and E (at most the bytes after the first J), and sp is read only
//     in an expression, which only X, Q, A, Dt, DT, DO, DB, DU or Dv can start. Their cost
//     grows with the arguments times the arguments and the pattern: a name with a possible
//     expansion and a template parameter is refused when packWork passes maxPackWork. The
//     costliest pack shape admitted (176 ints expanded over T_, worstPackAdmitted) takes
//     about 3 ms; PyTorch's AMP and foreach kernels ("DpT1_" after a pack of lambdas) count
//     up to 20,300.
//   - The rest is at most quadratic in the length: each substitution reference and each
//     local name's encoding walks the tree once, and printing compares every node with the
//     nodes it is nested in, for at most 4 KiB of output. At most 1 KiB, at most 8 local
//     names ('Z') and lambdas ("Ul"), and the limits below: the costliest name found that
//     check admits takes about 2 ms of CPU (BenchmarkCheckedWorst; a 1 KiB name without
//     those limits, 16 ms), realistic names 0.01-0.4 ms.
//
// Names over 1 KiB are not demangled at all. The last limits refuse shapes that stay within
// these bounds but cost much more per byte than realistic names (a tenth of a microsecond
// per byte): more substitution references than 16 and one every 8 bytes; nesting
// (N, I, J, Z, X not yet closed by E, counted over every byte) deeper than 32; runs of more
// than 16 pointer and qualifier codes (P, R, O, K, V, r) or more than 64 in all; chains of
// more than 128 source names (a::a::a...).
func check(name string) string {
	if len(name) > maxDemangleLen {
		return TooLong
	}
	var casts, refs, localNames, lambdas, depth, maxD, run, maxRun, qualifiers int
	var copies copyTargets
	refEnd := 0           // where the sequence ID of the last reference ends
	param := false        // a template parameter was read
	expression := false   // an expression may have started
	firstJ := -1          // where the first argument pack may start
	firstPack := -1       // where the first pack expansion may start (-1: none may have been read)
	refAfterPack := false // a substitution reference was read after firstPack
	for i := 0; i < len(name); i++ {
		c := name[i]
		var next byte
		if i+1 < len(name) {
			next = name[i+1]
		}
		switch c {
		case 'c':
			if next == 'v' {
				casts++
			}
		case 'T':
			if next == '_' || isDigit(next) || next == 'L' && i+2 < len(name) && (name[i+2] == '_' || isDigit(name[i+2])) {
				param = true
			}
		case 'S':
			if i < refEnd {
				break // inside the sequence ID of the reference counted last
			}
			if id, end, ok := seqID(name, i+1); ok {
				refs++
				refEnd = end
				refAfterPack = refAfterPack || firstPack >= 0
				if param && !copies.add(id) {
					return TemplateCopies
				}
			}
		case 'D':
			switch next {
			case 'p':
				if firstPack < 0 {
					firstPack = i
				}
			case 't', 'T', 'O', 'B', 'U', 'v':
				expression = true
			}
		case 's':
			if next == 'p' && expression && firstPack < 0 {
				firstPack = i
			}
		case 'J':
			if firstJ < 0 {
				firstJ = i
			}
		case 'X', 'Q', 'A':
			expression = true
		case 'U':
			if next == 'l' {
				lambdas++
			}
		case 'Z':
			localNames++
		}
		switch c {
		case 'N', 'I', 'J', 'Z', 'X':
			depth++
			maxD = max(maxD, depth)
		case 'E':
			depth = max(depth-1, 0)
		}
		switch c {
		case 'P', 'R', 'O', 'K', 'V', 'r':
			run++
			maxRun = max(maxRun, run)
			qualifiers++
		default:
			run = 0
		}
	}
	switch {
	case casts > maxCasts:
		return CastOperators
	case firstPack >= 0 && param && packWork(name, firstJ, firstPack, refAfterPack, copies.growth()) > maxPackWork:
		return PackExpansions
	case localNames > maxLocalNames || lambdas > maxLambdas:
		return LocalNames
	case refs > 16+len(name)/minBytesPerSubstn:
		return Substitutions
	case maxD > maxDepth || maxRun > maxQualifierRun || qualifiers > maxQualifiers || longestNameChain(name) > maxNameChain:
		return Nesting
	}
	return ""
}

// copyTargets counts the substitution references read after a template parameter, by the
// sequence ID they refer to. References to one entry copy it once each; an entry can hold
// copies of the entries referenced before it, so the copies grow the tree at most
// prod(1 + references to t) times over the targets t.
type copyTargets struct {
	ids    [maxCopyTargets]string
	counts [maxCopyTargets]int
	n      int
}

// maxCopyGrowth bounds prod(1 + references to t); every target at least doubles it, so
// there are at most 12 of them.
const (
	maxCopyGrowth  = 4096
	maxCopyTargets = 12
)

// add counts a reference to id and reports whether the growth stays within maxCopyGrowth.
func (c *copyTargets) add(id string) bool {
	i := 0
	for i < c.n && (c.ids[i] != id || id == "?") {
		i++
	}
	if i == c.n {
		if c.n == maxCopyTargets {
			return false
		}
		c.ids[i] = id
		c.n++
	}
	c.counts[i]++
	return c.growth() <= maxCopyGrowth
}

// growth is prod(1 + references to t) over the targets counted so far.
func (c *copyTargets) growth() int {
	g := 1
	for j := range c.n {
		g *= 1 + c.counts[j]
	}
	return g
}

// packWork bounds the work of pack expansions: the arguments of any pack (at most the bytes
// after the first J; one without a J) times the arguments and the pattern (the bytes after
// the first expansion, or, when a substitution reference follows it and may name a larger
// tree, the whole name grown by its copies).
func packWork(name string, firstJ, firstPack int, refAfterPack bool, growth int) int {
	args := 1
	if firstJ >= 0 {
		args = len(name) - firstJ
	}
	pattern := len(name) - firstPack
	if refAfterPack {
		pattern = len(name) * growth
	}
	return args * (args + pattern)
}

// seqID reads the sequence ID of a substitution reference whose 'S' is at start-1: the
// digits and upper-case letters up to '_' (the demangler refuses a reference without it,
// so then ok is false). A reference is found at every 'S' of such a run, and which one the
// demangler reads depends on how it parsed the bytes before; but the first it reads takes
// the run up to '_', so a run holds at most one reference. When the run holds another 'S',
// or more than 8 letters (an index a 1 KiB name cannot have), its target is unknown: id is
// "?", a target of its own.
func seqID(name string, start int) (id string, end int, ok bool) {
	end = start
	for end < len(name) && (isDigit(name[end]) || isUpper(name[end])) {
		end++
	}
	if end == len(name) || name[end] != '_' {
		return "", end, false
	}
	id = name[start:end]
	if len(id) > 8 || strings.IndexByte(id, 'S') >= 0 {
		id = "?"
	}
	return id, end, true
}

// longestNameChain returns the most source names (a length, then that many bytes) found one
// after the other, as in the nested name a::a::a (N1a1a1aE), whose printing costs the square
// of their number. It reads each byte at most twice.
func longestNameChain(name string) int {
	longest := 0
	for i := 0; i < len(name); {
		if !isDigit(name[i]) {
			i++
			continue
		}
		n, j := 0, i
		for j < len(name) && isDigit(name[j]) {
			k, l := j, 0
			for k < len(name) && isDigit(name[k]) && l <= len(name) {
				l = l*10 + int(name[k]-'0')
				k++
			}
			if l == 0 || l > len(name)-k {
				break
			}
			j = k + l
			n++
		}
		longest = max(longest, n)
		i = max(j, i+1)
	}
	return longest
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
