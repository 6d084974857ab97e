package mapping

import (
	"fmt"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// NamePrefix starts every metric name this package produces.
const NamePrefix = "cupti_"

// derived is what naming rules decide for one full Perfworks name.
type derived struct {
	stem     string        // Prometheus name without unit and _total, e.g. cupti_dram_read
	unit     string        // Prometheus unit words, e.g. "bytes_per_second", "ratio"; "" for none
	kind     snapshot.Kind // KindCounter or KindGauge
	scale    float64       // CUPTI value times scale gives the value in unit
	ucum     string        // OTel unit
	otelName string        // OTel name, e.g. cupti.dram.bytes_read.per_second
	help     string        // what the value is, without the window statistic
}

// promName assembles a Prometheus name from a stem, an optional statistic ("max", "min"),
// the unit and the kind: <stem>[_<stat>][_<unit>][_total].
func promName(stem, stat, unit string, kind snapshot.Kind) string {
	n := stem
	if stat != "" {
		n += "_" + stat
	}
	if unit != "" {
		n += "_" + unit
	}
	if kind == snapshot.KindCounter {
		n += "_total"
	}
	return n
}

// derive names a metric that no rule covers. n must have passed checkType for p.Type.
func derive(n Name, p pmdata.Properties) derived {
	sub := n.Submetric
	dimText := p.DimUnit
	if strings.HasSuffix(sub, "per_second") {
		// CUPTI reports a full name's own unit ("byte/second"); the submetric adds the rate.
		dimText = strings.TrimSuffix(dimText, "/second")
	}
	dim := parseDim(dimText)
	d := derived{kind: snapshot.KindGauge, scale: 1, ucum: "1"}
	var extra []string
	moveUnit := true // move a quantity word equal to the unit to the end of the name
	switch {
	case p.Type == pmdata.TypeRatio && sub == "pct",
		strings.HasPrefix(sub, "pct_of_peak_sustained_"):
		d.unit, d.scale, moveUnit = "ratio", 0.01, false
		if w := strings.TrimPrefix(sub, "pct_of_peak_sustained_"); w != sub {
			extra = []string{"of", "peak", w}
		}
	case p.Type == pmdata.TypeRatio: // ratio, max_rate: the quantity reads as a whole ("average_warps_active_per_...")
		d.unit, d.scale, d.ucum, moveUnit = dim.word, dim.scale, dim.ucum, false
		if sub == "max_rate" {
			extra = []string{"max", "rate"}
		}
	case sub == "":
		d.kind, d.unit, d.scale, d.ucum = snapshot.KindCounter, dim.word, dim.scale, dim.ucum
	case strings.HasSuffix(sub, "per_second"):
		d.unit, d.scale, d.ucum = joinWords(dim.word, "per_second"), dim.scale, dim.ucum+"/s"
		if sub != "per_second" { // peak_sustained_*.per_second
			extra = peakTokens(strings.TrimSuffix(sub, ".per_second"))
		}
	case strings.HasPrefix(sub, "per_cycle_"):
		when := strings.TrimPrefix(strings.TrimPrefix(sub, "per_cycle_"), "in_")
		d.unit, d.scale, d.ucum = joinWords(dim.word, "per_"+when+"_cycle"), dim.scale, dim.ucum+"/{cycle}"
	case strings.HasPrefix(sub, "peak_sustained"):
		d.unit, d.scale, d.ucum = joinWords(dim.word, "per_cycle"), dim.scale, dim.ucum+"/{cycle}"
		extra = peakTokens(sub)
	}
	if d.ucum == "1/s" || d.ucum == "1/{cycle}" {
		d.ucum = strings.TrimPrefix(d.ucum, "1")
	}

	tokens := prefixTokens(n.Prefix)
	tokens = append(tokens, n.Unit)
	if n.Rollup != "" && n.Rollup != "sum" {
		// "unit_max", not "max": <stem>_max_<unit> is the window maximum.
		tokens = append(tokens, "unit", n.Rollup)
	}
	q := strings.Split(n.Quantity, "_")
	if moveUnit && dim.single != "" {
		q = removeFirst(q, dim.single)
	}
	tokens = append(tokens, q...)
	tokens = append(tokens, extra...)
	for i, t := range tokens {
		tokens[i] = lintSafe(t)
	}
	d.stem = NamePrefix + strings.Join(tokens, "_")
	if d.unit == "" && d.kind == snapshot.KindGauge && hasReservedSuffix(d.stem) {
		d.stem += "_value"
	}
	d.otelName = otelName(n)
	d.help = deriveHelp(n, p)
	return d
}

// peakTokens turns "peak_sustained[_active]" into name tokens: "peak" [+ "active"].
func peakTokens(sub string) []string {
	t := []string{"peak"}
	if w := strings.TrimPrefix(sub, "peak_sustained_"); w != sub {
		t = append(t, w)
	}
	return t
}

func joinWords(a, b string) string {
	if a == "" {
		return b
	}
	return a + "_" + b
}

func removeFirst(list []string, s string) []string {
	for i, x := range list {
		if x == s {
			return append(append([]string(nil), list[:i]...), list[i+1:]...)
		}
	}
	return list
}

// prefixTokens turns a catalog prefix such as "TPC.TriageCompute" or "FE_B.TriageCompute"
// into lowercase name tokens: tpc_triage_compute, feb_triage_compute (a one-letter part is
// glued to the one before it, since promlint reads a lone "b" as an abbreviated unit).
func prefixTokens(prefix string) []string {
	if prefix == "" {
		return nil
	}
	var out []string
	for _, seg := range strings.Split(prefix, ".") {
		var parts []string
		for _, p := range strings.Split(snakeCase(seg), "_") {
			switch {
			case p == "":
			case len(p) == 1 && len(parts) > 0:
				parts[len(parts)-1] += p
			default:
				parts = append(parts, p)
			}
		}
		out = append(out, parts...)
	}
	return out
}

// snakeCase lowercases s, putting an underscore at each lower-to-upper change (TriageCompute
// -> triage_compute).
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && s[i-1] >= 'a' && s[i-1] <= 'z' {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// otelName is cupti.[prefix.]unit.quantity[.rollup][.submetric], the rollup left out when
// it is sum; for example cupti.dram.bytes_read.per_second.
func otelName(n Name) string {
	parts := []string{"cupti"}
	if n.Prefix != "" {
		for _, seg := range strings.Split(n.Prefix, ".") {
			parts = append(parts, snakeCase(seg))
		}
	}
	parts = append(parts, n.Unit, n.Quantity)
	if n.Rollup != "" && n.Rollup != "sum" {
		parts = append(parts, n.Rollup)
	}
	if n.Submetric != "" {
		parts = append(parts, n.Submetric)
	}
	return strings.Join(parts, ".")
}

var rollupHelp = map[string]string{
	"sum": "sum over all %s instances",
	"avg": "average over %s instances",
	"min": "minimum over %s instances",
	"max": "maximum over %s instances",
}

// deriveHelp writes one line: the Perfworks name, the CUPTI description, and what the
// rollup and submetric mean.
func deriveHelp(n Name, p pmdata.Properties) string {
	var what []string
	if n.Rollup != "" {
		what = append(what, fmt.Sprintf(rollupHelp[n.Rollup], n.Unit))
	}
	switch s := n.Submetric; {
	case s == "" && p.Type == pmdata.TypeCounter:
		what = append(what, "accumulated")
	case s == "pct":
		what = append(what, "as a ratio (0..1)")
	case s == "ratio":
		what = append(what, "ratio")
	case s == "max_rate":
		what = append(what, "maximum value of the ratio")
	case strings.HasPrefix(s, "pct_of_peak_sustained_"):
		what = append(what, "ratio (0..1) of the sustained peak rate over "+strings.TrimPrefix(s, "pct_of_peak_sustained_")+" cycles")
	default:
		what = append(what, strings.ReplaceAll(strings.ReplaceAll(s, ".", " "), "_", " "))
	}
	desc := strings.Join(strings.Fields(p.Description), " ")
	if desc == "" {
		desc = n.Unit + " " + strings.ReplaceAll(n.Quantity, "_", " ")
	}
	return fmt.Sprintf("%s (Perfworks %s: %s).", strings.TrimSuffix(desc, "."), n.String(), strings.Join(what, ", "))
}
