package mapping

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Name is a parsed Perfworks metric name:
//
//	[prefix.]unit__quantity[.rollup][.submetric]
//
// for example TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed has
// prefix "TPC.TriageCompute", unit "sm", quantity "cycles_active", rollup "avg" and submetric
// "pct_of_peak_sustained_elapsed". A base metric as listed by the catalog has neither rollup
// nor submetric.
type Name struct {
	Prefix    string // dotted namespace before the unit, e.g. "FBSP.TriageCompute"; "" for none
	Unit      string // hardware unit, e.g. "dram", "sm", "l1tex"
	Quantity  string // quantity with its qualifiers, e.g. "bytes_read"
	Rollup    string // "sum", "avg", "min", "max" or ""
	Submetric string // e.g. "per_second", "pct", "peak_sustained_active.per_second" or ""
}

// Rollups are the reductions over unit instances, in Perfworks order.
var Rollups = []string{"sum", "avg", "min", "max"}

// CounterSubmetrics are the submetrics a counter (after a rollup) can take; throughputs take the
// pct_of_peak_sustained_* ones. The _region and _frame forms come from the Perfworks
// enumeration (NVPW_Submetric); CUPTI documents the _active and _elapsed forms.
var CounterSubmetrics = []string{
	"per_second",
	"per_cycle_active", "per_cycle_elapsed", "per_cycle_in_region", "per_cycle_in_frame",
	"pct_of_peak_sustained_active", "pct_of_peak_sustained_elapsed",
	"pct_of_peak_sustained_region", "pct_of_peak_sustained_frame",
	"peak_sustained",
	"peak_sustained_active", "peak_sustained_active.per_second",
	"peak_sustained_elapsed", "peak_sustained_elapsed.per_second",
	"peak_sustained_region", "peak_sustained_region.per_second",
	"peak_sustained_frame", "peak_sustained_frame.per_second",
}

// ThroughputSubmetrics are the submetrics a throughput (after a rollup) can take.
var ThroughputSubmetrics = []string{
	"pct_of_peak_sustained_active", "pct_of_peak_sustained_elapsed",
	"pct_of_peak_sustained_region", "pct_of_peak_sustained_frame",
}

// RatioSubmetrics are the submetrics a ratio takes; ratios take no rollup.
var RatioSubmetrics = []string{"pct", "ratio", "max_rate"}

var (
	prefixSegRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
	unitRE      = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	quantityRE  = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*$`)
)

// ParseName parses a Perfworks metric name, with or without prefix, rollup and submetric.
// It checks the syntax and the rollup and submetric vocabulary, not whether the metric exists
// or whether its type takes that rollup (Mapper.Map does, with the metric's properties).
func ParseName(s string) (Name, error) {
	var n Name
	fail := func(format string, args ...any) (Name, error) {
		return Name{}, fmt.Errorf("parse metric name %q: %s", s, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return fail("empty name (want unit__quantity[.rollup[.submetric]], e.g. dram__bytes_read.sum)")
	}
	segs := strings.Split(s, ".")
	for i, seg := range segs {
		if seg == "" {
			return fail("empty segment %d between dots", i+1)
		}
	}
	base := -1
	for i, seg := range segs {
		if strings.Contains(seg, "__") {
			base = i
			break
		}
	}
	if base < 0 {
		return fail(`no "__" between unit and quantity (want unit__quantity[.rollup[.submetric]], e.g. dram__bytes_read.sum)`)
	}
	for _, seg := range segs[:base] {
		if !prefixSegRE.MatchString(seg) {
			return fail("bad prefix segment %q (want letters, digits and _, starting with a letter, e.g. TPC.TriageCompute)", seg)
		}
	}
	n.Prefix = strings.Join(segs[:base], ".")
	n.Unit, n.Quantity, _ = strings.Cut(segs[base], "__")
	if !unitRE.MatchString(n.Unit) {
		return fail("bad unit %q (want lowercase letters and digits, e.g. dram, sm, l1tex)", n.Unit)
	}
	if !quantityRE.MatchString(n.Quantity) {
		return fail("bad quantity %q (want lowercase words joined by single _, e.g. bytes_read)", n.Quantity)
	}
	rest := segs[base+1:]
	if len(rest) == 0 {
		return n, nil
	}
	if slices.Contains(Rollups, rest[0]) {
		n.Rollup = rest[0]
		rest = rest[1:]
	}
	n.Submetric = strings.Join(rest, ".")
	switch {
	case n.Submetric == "":
	case slices.Contains(RatioSubmetrics, n.Submetric):
		if n.Rollup != "" {
			return fail("submetric %q takes no rollup (ratios have none): drop %q", n.Submetric, "."+n.Rollup)
		}
	case slices.Contains(CounterSubmetrics, n.Submetric):
		if n.Rollup == "" {
			return fail("submetric %q needs a rollup before it (one of %s)", n.Submetric, strings.Join(Rollups, ", "))
		}
	default:
		if n.Rollup == "" && len(rest) == 1 {
			return fail("unknown rollup or submetric %q (rollups: %s; ratio submetrics: %s)",
				n.Submetric, strings.Join(Rollups, ", "), strings.Join(RatioSubmetrics, ", "))
		}
		if n.Rollup == "" {
			return fail("unknown rollup %q (want one of %s)", rest[0], strings.Join(Rollups, ", "))
		}
		return fail("unknown submetric %q (want one of %s)", n.Submetric, strings.Join(CounterSubmetrics, ", "))
	}
	return n, nil
}

// String returns the Perfworks name; ParseName(n.String()) gives n back.
func (n Name) String() string {
	var b strings.Builder
	if n.Prefix != "" {
		b.WriteString(n.Prefix)
		b.WriteByte('.')
	}
	b.WriteString(n.Unit)
	b.WriteString("__")
	b.WriteString(n.Quantity)
	if n.Rollup != "" {
		b.WriteByte('.')
		b.WriteString(n.Rollup)
	}
	if n.Submetric != "" {
		b.WriteByte('.')
		b.WriteString(n.Submetric)
	}
	return b.String()
}

// Base returns the base metric name (prefix, unit and quantity), as the catalog lists it.
func (n Name) Base() string {
	return Name{Prefix: n.Prefix, Unit: n.Unit, Quantity: n.Quantity}.String()
}

// checkType reports whether the rollup and submetric suit a metric of type t.
func (n Name) checkType(t pmdata.MetricType) error {
	switch t {
	case pmdata.TypeCounter:
		if n.Rollup == "" {
			return fmt.Errorf("counter %s needs a rollup (.sum, .avg, .min or .max), e.g. %s.sum", n.Base(), n.Base())
		}
		if n.Submetric != "" && !slices.Contains(CounterSubmetrics, n.Submetric) {
			return fmt.Errorf("counter %s does not take submetric %q", n.Base(), n.Submetric)
		}
	case pmdata.TypeRatio:
		if n.Rollup != "" || n.Submetric == "" {
			return fmt.Errorf("ratio %s takes no rollup and one of the submetrics .pct, .ratio, .max_rate, e.g. %s.pct", n.Base(), n.Base())
		}
	case pmdata.TypeThroughput:
		if n.Rollup == "" || !slices.Contains(ThroughputSubmetrics, n.Submetric) {
			return fmt.Errorf("throughput %s needs a rollup and a .pct_of_peak_sustained_* submetric, e.g. %s.avg.pct_of_peak_sustained_elapsed", n.Base(), n.Base())
		}
	default:
		return fmt.Errorf("metric %s: unknown metric type %d", n.Base(), t)
	}
	return nil
}

// ValidNames lists every full name a base metric of type t can take, in a fixed order:
// counters: each rollup alone and with each counter submetric; ratios: each ratio submetric;
// throughputs: each rollup with each throughput submetric.
func ValidNames(base Name, t pmdata.MetricType) []string {
	b := base.Base()
	var out []string
	switch t {
	case pmdata.TypeCounter:
		for _, r := range Rollups {
			out = append(out, b+"."+r)
			for _, s := range CounterSubmetrics {
				out = append(out, b+"."+r+"."+s)
			}
		}
	case pmdata.TypeRatio:
		for _, s := range RatioSubmetrics {
			out = append(out, b+"."+s)
		}
	case pmdata.TypeThroughput:
		for _, r := range Rollups {
			for _, s := range ThroughputSubmetrics {
				out = append(out, b+"."+r+"."+s)
			}
		}
	}
	return out
}
