package mapping

import (
	"regexp"
	"sort"
	"strings"
)

// dimFactor is one factor of a CUPTI dimension unit such as "gpc_cycle" or "byte".
type dimFactor struct {
	singular, plural string  // words in Prometheus names
	ucum             string  // UCUM unit (annotations in braces for counts of things)
	scale            float64 // to the base unit (nanosecond -> second)
	cycle            bool    // a clock cycle: sorts last in products ("warp_cycles")
}

// dimFactors maps the factors CUPTI uses in dimension units to words. CUPTI writes products
// by concatenation ("gpc_cyclewarp" is gpc_cycle x warp) and quotients with "/"
// ("instruction/warp"); splitDim takes them apart with this table, longest match first.
var dimFactors = map[string]dimFactor{
	"byte":                 {"byte", "bytes", "By", 1, false},
	"kilobyte":             {"kilobyte", "kilobyte", "kBy", 1, false}, // kept as is: "kilobytes" is not a base unit
	"nanosecond":           {"second", "seconds", "s", 1e-9, false},
	"percent":              {"ratio", "ratio", "1", 0.01, false},
	"instruction":          {"instruction", "instructions", "{instruction}", 1, false},
	"warp":                 {"warp", "warps", "{warp}", 1, false},
	"thread":               {"thread", "threads", "{thread}", 1, false},
	"cta":                  {"cta", "ctas", "{cta}", 1, false},
	"cga":                  {"cga", "cgas", "{cga}", 1, false},
	"quad":                 {"quad", "quads", "{quad}", 1, false},
	"register":             {"register", "registers", "{register}", 1, false},
	"rf_quantum":           {"rf_quantum", "rf_quanta", "{rf_quantum}", 1, false},
	"workload":             {"workload", "workloads", "{workload}", 1, false},
	"fe_op":                {"operation", "operations", "{operation}", 1, false},
	"l1tex_line":           {"line", "lines", "{line}", 1, false},
	"l2_sector":            {"sector", "sectors", "{sector}", 1, false},
	"l2_request":           {"request", "requests", "{request}", 1, false},
	"gcc_request":          {"request", "requests", "{request}", 1, false},
	"idc_request":          {"request", "requests", "{request}", 1, false},
	"l1tex_request":        {"request", "requests", "{request}", 1, false},
	"l1tex_wavefront":      {"wavefront", "wavefronts", "{wavefront}", 1, false},
	"l1data_bank_conflict": {"bank_conflict", "bank_conflicts", "{bank_conflict}", 1, false},
	"l1data_bank_access":   {"bank_access", "bank_accesses", "{bank_access}", 1, false},
	"cycle":                {"cycle", "cycles", "{cycle}", 1, true},
}

// dimKeys holds the keys of dimFactors, longest first, for greedy splitting.
var dimKeys = func() []string {
	keys := make([]string, 0, len(dimFactors))
	for k := range dimFactors {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(keys[i]) != len(keys[j]) {
			return len(keys[i]) > len(keys[j])
		}
		return keys[i] < keys[j]
	})
	return keys
}()

// dimUnit is a CUPTI dimension unit turned into name words and a UCUM unit.
type dimUnit struct {
	word  string  // e.g. "bytes", "warp_cycles", "instructions_per_warp"; "" when dimensionless
	ucum  string  // e.g. "By", "{warp}.{cycle}", "{instruction}/{warp}"; "1" when dimensionless
	scale float64 // multiply the value by this to get the unit of word
	// single is the plural word when the unit is one plain factor ("bytes", "cycles"): a
	// quantity token equal to it is moved to the end of the name instead of being repeated.
	single string
}

// parseDim turns a CUPTI dimension unit into words. Factors it does not know become words
// of their own (sanitized), so a new chip's unit still yields a valid name.
func parseDim(dim string) dimUnit {
	if dim == "" {
		return dimUnit{ucum: "1", scale: 1}
	}
	numS, denS, _ := strings.Cut(dim, "/")
	num, den := splitDim(numS), splitDim(denS)
	u := dimUnit{scale: 1}
	var numWords, numUCUM []string
	for i, f := range num {
		u.scale *= f.scale
		w := f.singular
		if i == len(num)-1 {
			w = f.plural
		}
		numWords = append(numWords, w)
		numUCUM = append(numUCUM, f.ucum)
	}
	u.word = strings.Join(numWords, "_")
	u.ucum = strings.Join(numUCUM, ".")
	if len(num) == 0 {
		u.ucum = "1"
	}
	for _, f := range den {
		u.scale /= f.scale
		if u.word == "" {
			u.word = "1"
		}
		u.word += "_per_" + f.singular
		u.ucum += "/" + f.ucum
	}
	if len(num) == 1 && len(den) == 0 {
		u.single = num[0].plural
	}
	return u
}

// splitDim splits a product of factors ("gpc_cyclewarp") into known factors, cycles last
// ("warp_cycles" reads better than "cycle_warps"). An unknown rest becomes one factor.
func splitDim(s string) []dimFactor {
	var out []dimFactor
	for s != "" {
		f, n := nextFactor(s)
		out = append(out, f)
		s = s[n:]
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].cycle && out[j].cycle })
	return out
}

// cycleRE matches a clock cycle of any domain: gpc_cycle, sys_cycle, dram_cycle, ...
var cycleRE = regexp.MustCompile(`^(?:[a-z0-9]+?_)*?cycle`)

// nextFactor returns the factor at the start of s and its length. Named factors win over a
// cycle ("bytegpc_cycle" is byte x gpc_cycle); an unknown rest becomes one factor.
func nextFactor(s string) (dimFactor, int) {
	for _, k := range dimKeys {
		if k != "cycle" && strings.HasPrefix(s, k) {
			return dimFactors[k], len(k)
		}
	}
	if loc := cycleRE.FindStringIndex(s); loc != nil {
		return dimFactors["cycle"], loc[1]
	}
	w := sanitizeWord(s)
	return dimFactor{singular: w, plural: w, ucum: "{" + w + "}", scale: 1}, len(s)
}

// sanitizeWord lowercases s and keeps letters, digits and single underscores.
func sanitizeWord(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
				b.WriteByte('_')
			}
		}
	}
	w := strings.TrimSuffix(b.String(), "_")
	if w == "" {
		return "unit"
	}
	return w
}
