package mapping

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// catalogEntry is one line of the GH100 PM-sampling catalog.
type catalogEntry struct {
	name  string
	props pmdata.Properties
}

// loadCatalog reads ../testdata/gh100_pm_sampling_base_metrics.tsv (type, name, hw unit,
// dim unit; # comments).
func loadCatalog(t testing.TB) []catalogEntry {
	t.Helper()
	f, err := os.Open("../testdata/gh100_pm_sampling_base_metrics.tsv")
	if err != nil {
		t.Fatalf("open catalog: %v", err)
	}
	defer f.Close()
	types := map[string]pmdata.MetricType{"counter": pmdata.TypeCounter, "ratio": pmdata.TypeRatio, "throughput": pmdata.TypeThroughput}
	var out []catalogEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) != 4 {
			t.Fatalf("catalog line %q: want 4 columns, got %d", line, len(cols))
		}
		typ, ok := types[cols[0]]
		if !ok {
			t.Fatalf("catalog line %q: unknown type %q", line, cols[0])
		}
		out = append(out, catalogEntry{cols[1], pmdata.Properties{Type: typ, HWUnit: cols[2], DimUnit: cols[3]}})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCatalogMapsUniquelyAndLints maps every GH100 base metric with every rollup and
// submetric its type takes (ValidNames), through one Mapper (which refuses a second owner
// of a series), checks that names, help and labels are unique and that promlint accepts
// every family.
func TestCatalogMapsUniquelyAndLints(t *testing.T) {
	cat := loadCatalog(t)
	if len(cat) != 1279 {
		t.Fatalf("catalog has %d base metrics, want 1279", len(cat))
	}
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{} // series key -> Perfworks name
	otel := map[string]string{}
	// The candidates of one curated metric share its series: pmsample collects one of them per
	// chip (and refuses explicit lists naming two), so only their first is counted here.
	alias := map[string]bool{}
	for _, c := range m.Curated() {
		for _, k := range c.Candidates[1:] {
			alias[k.Perfworks] = true
		}
	}
	families := map[string]*dto.MetricFamily{}
	total := 0
	for _, e := range cat {
		base, err := ParseName(e.name)
		if err != nil {
			t.Fatalf("catalog name: %v", err)
		}
		if base.String() != e.name {
			t.Fatalf("round trip %q -> %q", e.name, base.String())
		}
		for _, full := range ValidNames(base, e.props.Type) {
			total++
			if alias[full] {
				continue
			}
			met, err := m.Map(full, e.props)
			if err != nil {
				t.Fatalf("Map(%s): %v", full, err)
			}
			descs := []*snapshot.Desc{met.Desc}
			if met.Desc.Kind == snapshot.KindGauge {
				if met.Max == nil || met.Min == nil {
					t.Fatalf("%s: gauge without Max/Min", full)
				}
				descs = append(descs, met.Max, met.Min)
			} else if met.Max != nil || met.Min != nil {
				t.Fatalf("%s: counter with Max/Min", full)
			}
			for _, d := range descs {
				key := seriesKey(d.Name, met.Labels)
				if o, dup := seen[key]; dup {
					t.Fatalf("%s and %s both map to %s", o, full, key)
				}
				seen[key] = full
				okey := seriesKey(d.OTelName, append(slices.Clone(met.Labels), d.OTelAttributes...))
				if o, dup := otel[okey]; dup {
					t.Fatalf("%s and %s both map to OTel series %s", o, full, okey)
				}
				otel[okey] = full
				addSample(families, d, met.Labels)
			}
		}
	}
	t.Logf("%d base metrics, %d full names, %d families", len(cat), total, len(families))
	var mfs []*dto.MetricFamily
	for _, mf := range families {
		mfs = append(mfs, mf)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range problems {
		if i == 20 {
			t.Fatalf("... %d problems in all", len(problems))
		}
		t.Errorf("promlint: %s: %s (from %s)", p.Metric, p.Text, seenName(seen, p.Metric))
	}
}

func seenName(seen map[string]string, name string) string {
	for k, v := range seen {
		if strings.HasPrefix(k, name+"{") {
			return v
		}
	}
	return "?"
}

// addSample adds one series of d (device labels and the metric's constant labels) to its
// family in families.
func addSample(families map[string]*dto.MetricFamily, d *snapshot.Desc, labels []snapshot.Label) {
	mf := families[d.Name]
	if mf == nil {
		typ := dto.MetricType_GAUGE
		if d.Kind == snapshot.KindCounter {
			typ = dto.MetricType_COUNTER
		}
		mf = &dto.MetricFamily{Name: proto.String(d.Name), Help: proto.String(d.Help), Type: typ.Enum()}
		families[d.Name] = mf
	}
	var lps []*dto.LabelPair
	for i, n := range d.LabelNames {
		v := "0"
		if i >= len(snapshot.DeviceLabelNames) {
			v = labels[i-len(snapshot.DeviceLabelNames)].Value
		}
		lps = append(lps, &dto.LabelPair{Name: proto.String(n), Value: proto.String(v)})
	}
	met := &dto.Metric{Label: lps}
	if d.Kind == snapshot.KindCounter {
		met.Counter = &dto.Counter{Value: proto.Float64(1)}
	} else {
		met.Gauge = &dto.Gauge{Value: proto.Float64(1)}
	}
	mf.Metric = append(mf.Metric, met)
}
