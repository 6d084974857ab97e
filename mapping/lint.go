package mapping

import (
	"regexp"
	"slices"
	"strings"
)

// The Prometheus naming conventions, as promlint checks them, constrain the words of a
// name: no abbreviated units, no non-base units, no type names, and only counters end in
// _total (histograms and summaries own _count, _sum and _bucket). Perfworks words that break
// them are respelled here, so every derived name passes promlint.

// abbreviations are the words promlint reads as abbreviated units.
var abbreviations = map[string]bool{
	"s": true, "ms": true, "us": true, "ns": true, "sec": true, "b": true, "kb": true,
	"mb": true, "gb": true, "tb": true, "pb": true, "m": true, "h": true, "d": true,
}

// nonBaseUnits are words promlint reads as units with a different base unit.
var nonBaseUnits = map[string]bool{
	"minutes": true, "hours": true, "days": true, "weeks": true, "kelvins": true,
	"fahrenheit": true, "rankine": true, "inches": true, "yards": true, "miles": true,
	"bits": true, "calories": true, "pounds": true, "ounces": true,
}

var (
	baseUnits   = []string{"amperes", "bytes", "celsius", "grams", "joules", "kelvin", "meters", "metres", "seconds", "volts"}
	unitPrefix  = regexp.MustCompile(`^(pico|nano|micro|milli|centi|deci|deca|hecto|kilo|kibi|mega|mebi|giga|gibi|tera|tebi|peta|pebi)`)
	typeWords   = map[string]bool{"counter": true, "gauge": true, "histogram": true, "summary": true, "untyped": true}
	reservedEnd = []string{"_total", "_count", "_sum", "_bucket"}
)

// lintSafe respells one name token that promlint would reject: a one-letter abbreviation
// (Perfworks pipeline stages such as the "m" of l1tex__m_xbar2l1tex) gets "stage" appended,
// other abbreviations and type names get "x"; a non-base unit word is made singular
// ("kilobytes" -> "kilobyte"), which promlint does not read as a unit.
func lintSafe(t string) string {
	switch {
	case abbreviations[t] && len(t) == 1:
		return t + "stage"
	case abbreviations[t], typeWords[t]:
		return t + "x"
	case nonBaseUnits[t] || isPrefixedUnit(t):
		if s := strings.TrimSuffix(t, "s"); s != t {
			return s
		}
		return t + "x"
	}
	return t
}

func isPrefixedUnit(t string) bool {
	p := unitPrefix.FindString(t)
	if p == "" {
		return false
	}
	rest := t[len(p):]
	return slices.Contains(baseUnits, rest) || nonBaseUnits[rest]
}

// hasReservedSuffix reports whether a non-counter name would end in a suffix that
// promlint reserves for counters, histograms and summaries.
func hasReservedSuffix(name string) bool {
	for _, s := range reservedEnd {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}
