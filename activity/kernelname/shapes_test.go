package kernelname

import (
	"strconv"
	"strings"
)

// Hostile shapes: mangled names on which the demangler's work grows faster than their
// length. k sets the size; each shape's reason is what check answers at the sizes tested.
type shape struct {
	name   string
	make   func(k int) string
	k      int // a size of about 1 KiB (or the size the old code never finished)
	reason string
}

var hostileShapes = []shape{
	// k nested conversion operators: 2^k passes (k=40 is 325 bytes).
	{"cast_operators", func(k int) string { return "_Z" + strings.Repeat("NcvT_I", k) + "2u0" + strings.Repeat("EE", k) }, 40, CastOperators},
	// A function template's parameters, each referring twice to the one before: the tree
	// doubles at each.
	{"template_copies", templateCopies, 85, TemplateCopies},
	{"nested_lambdas", nestedLambdas, 145, LocalNames},
	{"nested_pointers", func(k int) string { return "_Z1fI" + strings.Repeat("P", k) + "iEv" }, 1016, Nesting},
	{"nested_names", func(k int) string { return "_ZN" + strings.Repeat("1a", k) + "Ev" }, 509, Nesting},
	{"nested_templates", func(k int) string { return "_Z1f" + strings.Repeat("I1a", k) + strings.Repeat("E", k) + "v" }, 254, Nesting},
	{"substitutions", func(k int) string { return "_Z1fI1a" + strings.Repeat("S_", k) + "Ev" }, 507, Substitutions},
	{"big_substitutions", bigSubstitutions, 760, Nesting},
	// A pack of k ints expanded over a pattern of pointers: k copies of the pattern.
	{"pack_expansion", func(k int) string {
		return "_ZZ1fIJ" + strings.Repeat("i", k) + "EEvDp" + strings.Repeat("P", 980-k) + "T_E1x"
	}, 300, PackExpansions},
}

func templateCopies(k int) string {
	s := "_ZZ1fIiEv1cIT_T_E"
	for i := range k {
		ref := "S" + strings.ToUpper(strconv.FormatInt(int64(2*i+3), 36)) + "_"
		s += "1cI" + ref + ref + "E"
	}
	return s + "E1x"
}

// nestedLambdas is f()::{lambda()#1}::{lambda()#1}::... k deep.
func nestedLambdas(k int) string {
	s := "1fv"
	for range k {
		s = "Z" + s + "EUlvE_"
	}
	return "_Z" + s
}

// bigSubstitutions is a chain of k pointers and references to it up to 1 KiB.
func bigSubstitutions(k int) string {
	s := "_Z1fI" + strings.Repeat("P", k) + "i"
	for ref := seqRef(k); len(s)+len(ref)+2 <= 1024 && strings.Count(s, "S") < 64; {
		s += ref
	}
	return s + "Ev"
}

// seqRef is the substitution reference to entry i (S_ is entry 0).
func seqRef(i int) string {
	if i == 0 {
		return "S_"
	}
	return "S" + strings.ToUpper(strconv.FormatInt(int64(i-1), 36)) + "_"
}

// worstAdmitted is the costliest shape found that check admits (a search mutating hostile
// shapes and realistic names, keeping what cost more): a pointer chain made 16*runs deep by
// references, 16 pointers at a time (runs and the total of qualifiers are bounded), a long
// identifier (references are allowed in proportion to the length), then references to the
// chain as long as check admits them, up to 1 KiB.
func worstAdmitted(runs, pad int) string {
	s := "_Z1fI" + strings.Repeat("P", 16) + "i"
	last := 16
	for range runs - 1 {
		s += strings.Repeat("P", 16) + seqRef(last)
		last += 16
	}
	s += strconv.Itoa(pad) + strings.Repeat("x", pad)
	for ref := seqRef(last); len(s)+len(ref)+2 <= 1024 && check(s+ref+"Ev") == ""; {
		s += ref
	}
	return s + "Ev"
}

// worstPackAdmitted is the costliest pack shape check admits: a pack of as many ints as
// maxPackWork allows, expanded over a template parameter (the pack's work grows with the
// square of its arguments; a longer pattern takes arguments away).
func worstPackAdmitted() string {
	s := "_ZZ1fIJiEEvDpT_E1x"
	for n := 2; check("_ZZ1fIJ"+strings.Repeat("i", n)+"EEvDpT_E1x") == ""; n++ {
		s = "_ZZ1fIJ" + strings.Repeat("i", n) + "EEvDpT_E1x"
	}
	return s
}
