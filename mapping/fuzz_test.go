package mapping

import (
	"regexp"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// promValidName is the Prometheus metric name syntax.
var promValidName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// FuzzParseName checks that ParseName never panics, that what it accepts round-trips, and
// that Map turns every accepted full name of a suitable type into valid Prometheus names.
// The seed corpus is in testdata/fuzz/FuzzParseName.
func FuzzParseName(f *testing.F) {
	f.Add("dram__bytes_read.sum.per_second")
	f.Add("FBSP.TriageCompute.dramc__cycles_elapsed.avg.pct_of_peak_sustained_elapsed")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "parse metric name ") {
				t.Fatalf("error %q lacks its context", err)
			}
			return
		}
		if n.String() != s {
			t.Fatalf("ParseName(%q).String() = %q", s, n.String())
		}
		again, err := ParseName(n.String())
		if err != nil || again != n {
			t.Fatalf("reparse of %q: %+v, %v; want %+v", s, again, err, n)
		}
		for _, typ := range []pmdata.MetricType{pmdata.TypeCounter, pmdata.TypeRatio, pmdata.TypeThroughput} {
			if n.checkType(typ) != nil {
				continue
			}
			m, err := New()
			if err != nil {
				t.Fatal(err)
			}
			met, err := m.Map(s, pmdata.Properties{Type: typ, DimUnit: "gpc_cyclewarp"})
			if err != nil {
				t.Fatalf("Map(%q) as type %d: %v", s, typ, err)
			}
			for _, d := range []*snapshot.Desc{met.Desc, met.Max, met.Min} {
				if d != nil && (!promValidName.MatchString(d.Name) || !strings.HasPrefix(d.Name, NamePrefix)) {
					t.Fatalf("Map(%q): invalid name %q", s, d.Name)
				}
			}
		}
	})
}

// FuzzParseRules checks that ParseRules never panics, that its errors are one line, and
// that rules it accepts are accepted by New unless they reuse a curated metric's series.
// The seed corpus is in testdata/fuzz/FuzzParseRules.
func FuzzParseRules(f *testing.F) {
	f.Add([]byte(goodRules))
	f.Add([]byte("rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := ParseRules(data, "fuzz.yaml")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		if _, err := New(rules...); err != nil && !strings.Contains(err.Error(), "curated") {
			t.Fatalf("New refused rules ParseRules accepted: %v", err)
		}
	})
}
