package demo

import (
	"strings"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// curatedMetrics are the Perfworks metrics behind the curated (DCGM-comparable) names, in
// the mapper's priority order.
func curatedMetrics() ([]string, error) {
	m, err := mapping.New()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range m.Curated() {
		out = append(out, c.Perfworks)
	}
	return out, nil
}

// baseOf is the base metric of a full Perfworks name: everything up to and including the
// first dot-separated part that holds "__" (so "TPC.TriageCompute.sm__cycles_active.avg.x"
// gives "TPC.TriageCompute.sm__cycles_active").
func baseOf(full string) string {
	parts := strings.Split(full, ".")
	for i, p := range parts {
		if strings.Contains(p, "__") {
			return strings.Join(parts[:i+1], ".")
		}
	}
	return full
}

// bareBase is the base metric without its counter-domain prefix ("sm__cycles_active").
func bareBase(full string) string {
	b := baseOf(full)
	return b[strings.LastIndex(b, ".")+1:]
}
