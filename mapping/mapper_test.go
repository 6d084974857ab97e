package mapping

import (
	"slices"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// catalogProps returns the properties of every GH100 base metric by name.
func catalogProps(t testing.TB) map[string]pmdata.Properties {
	props := map[string]pmdata.Properties{}
	for _, e := range loadCatalog(t) {
		props[e.name] = e.props
	}
	return props
}

func mapFull(t *testing.T, m *Mapper, props map[string]pmdata.Properties, full string) Metric {
	t.Helper()
	n, err := ParseName(full)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := props[n.Base()]
	if !ok {
		t.Fatalf("%s: base metric %s not in the GH100 catalog", full, n.Base())
	}
	met, err := m.Map(full, p)
	if err != nil {
		t.Fatalf("Map(%s): %v", full, err)
	}
	return met
}

// TestCuratedNames checks the curated names of the brief, their Perfworks metrics (which
// must exist in the GH100 catalog), labels, scale and window statistics.
func TestCuratedNames(t *testing.T) {
	want := []string{
		"cupti_graphics_engine_active_ratio", "cupti_sm_active_ratio", "cupti_sm_occupancy_ratio",
		"cupti_tensor_pipe_active_ratio", "cupti_dram_active_ratio", "cupti_fp64_pipe_active_ratio",
		"cupti_fp32_pipe_active_ratio", `cupti_pcie_bytes_total{direction="rx"}`, `cupti_pcie_bytes_total{direction="tx"}`,
		"cupti_dram_read_bytes_total", "cupti_dram_write_bytes_total",
		`cupti_nvlink_bytes_total{direction="rx"}`, `cupti_nvlink_bytes_total{direction="tx"}`, "cupti_fp16_pipe_active_ratio",
		"cupti_gpu_context_switch_cycles_total",
	}
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	props := catalogProps(t)
	cur := m.Curated()
	var got []string
	for _, c := range cur {
		met := mapFull(t, m, props, c.Perfworks)
		if !slices.Equal(met.Labels, c.Labels) {
			t.Errorf("%s: labels %v, Curated says %v", c.Perfworks, met.Labels, c.Labels)
		}
		s := met.Desc.Name
		for _, l := range met.Labels {
			s += "{" + l.Name + `="` + l.Value + `"}`
		}
		got = append(got, s)
		if met.Desc.Name != c.Name {
			t.Errorf("%s maps to %s, Curated says %s", c.Perfworks, met.Desc.Name, c.Name)
		}
		wantLabels := append(append([]string{}, snapshot.DeviceLabelNames...), labelNamesOf(c.Labels)...)
		if !slices.Equal(met.Desc.LabelNames, wantLabels) {
			t.Errorf("%s: label names %v, want %v", c.Name, met.Desc.LabelNames, wantLabels)
		}
		switch met.Desc.Kind {
		case snapshot.KindGauge:
			stem := strings.TrimSuffix(c.Name, "_ratio")
			if met.Scale != 0.01 || met.Desc.Unit != "ratio" || met.Desc.OTelUnit != "1" {
				t.Errorf("%s: scale %g unit %q otel unit %q, want 0.01 ratio 1", c.Name, met.Scale, met.Desc.Unit, met.Desc.OTelUnit)
			}
			if met.Max.Name != stem+"_max_ratio" || met.Min.Name != stem+"_min_ratio" {
				t.Errorf("%s: window stats %s %s", c.Name, met.Max.Name, met.Min.Name)
			}
		case snapshot.KindCounter:
			unit, otel := "bytes", "By"
			if strings.HasSuffix(c.Name, "_cycles_total") {
				unit, otel = "cycles", "{cycle}"
			}
			if met.Scale != 1 || met.Desc.Unit != unit || met.Desc.OTelUnit != otel || met.Max != nil {
				t.Errorf("%s: scale %g unit %q otel %q max %v", c.Name, met.Scale, met.Desc.Unit, met.Desc.OTelUnit, met.Max)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("curated series\n got %q\nwant %q", got, want)
	}
}

// TestCuratedLintAndRegister registers every curated family as const metrics in a pedantic
// registry (which checks help and label consistency across pcie rx/tx) and lints them.
func TestCuratedLintAndRegister(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	props := catalogProps(t)
	reg := prometheus.NewPedanticRegistry()
	c := &constCollector{}
	for _, cm := range m.Curated() {
		met := mapFull(t, m, props, cm.Perfworks)
		c.add(met)
	}
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	// 8 gauges with mean, max and min, 6 byte counters (pcie and nvlink, rx and tx; dram
	// read and write) and the context-switch cycles.
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 8*3+7 {
		t.Errorf("gathered %d series (err %v), want %d", n, err, 8*3+7)
	}
}

// constCollector emits one const metric per desc of the metrics added to it.
type constCollector struct{ metrics []prometheus.Metric }

func (c *constCollector) add(met Metric) {
	for _, d := range []*snapshot.Desc{met.Desc, met.Max, met.Min} {
		if d == nil {
			continue
		}
		values := []string{"0", "GPU-0", "H200", "GH100", "0000:00:00.0"}
		for _, l := range met.Labels {
			values = append(values, l.Value)
		}
		typ := prometheus.GaugeValue
		if d.Kind == snapshot.KindCounter {
			typ = prometheus.CounterValue
		}
		pd := prometheus.NewDesc(d.Name, d.Help, d.LabelNames, nil)
		c.metrics = append(c.metrics, prometheus.MustNewConstMetric(pd, typ, 1, values...))
	}
}

func (c *constCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics {
		ch <- m.Desc()
	}
}

func (c *constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.metrics {
		ch <- m
	}
}

// TestSharedDesc checks that series of one family share one *Desc.
func TestSharedDesc(t *testing.T) {
	m, _ := New()
	props := catalogProps(t)
	rx := mapFull(t, m, props, "PCI.TriageCompute.pcie__read_bytes.sum")
	tx := mapFull(t, m, props, "PCI.TriageCompute.pcie__write_bytes.sum")
	if rx.Desc != tx.Desc {
		t.Errorf("pcie rx and tx have different *Desc: %+v %+v", rx.Desc, tx.Desc)
	}
	again := mapFull(t, m, props, "PCI.TriageCompute.pcie__read_bytes.sum")
	if again.Desc != rx.Desc {
		t.Error("mapping the same name twice gave another *Desc")
	}
}

// TestDescs: a counter is one family, a gauge its mean, maximum and minimum.
func TestDescs(t *testing.T) {
	m, _ := New()
	props := catalogProps(t)
	counter := mapFull(t, m, props, "PCI.TriageCompute.pcie__read_bytes.sum")
	if d := counter.Descs(); len(d) != 1 || d[0] != counter.Desc {
		t.Errorf("counter: Descs %v, want its Desc alone", d)
	}
	gauge := mapFull(t, m, props, "sm__cycles_active.avg.pct_of_peak_sustained_elapsed")
	if d := gauge.Descs(); len(d) != 3 || d[0] != gauge.Desc || d[1] != gauge.Max || d[2] != gauge.Min || d[1] == nil || d[2] == nil {
		t.Errorf("gauge: Descs %v, want Desc, Max, Min", d)
	}
}

func TestMapErrors(t *testing.T) {
	counter := pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "dram", DimUnit: "byte"}
	tests := []struct {
		name  string
		props pmdata.Properties
		rules []Rule
		want  string
	}{
		{"dram__bytes", counter, nil, "needs a rollup"},
		{"dram__bytes.sum.pct", counter, nil, "takes no rollup"},
		{"dram__bytes.ratio", counter, nil, "counter dram__bytes needs a rollup"},
		{"lts__t_sector_hit_rate.sum", pmdata.Properties{Type: pmdata.TypeRatio}, nil, "ratio lts__t_sector_hit_rate takes no rollup"},
		{"dram__bytes_read.sum", counter, []Rule{{Match: "dram__bytes_read.sum", Name: "cupti_dram_read_bytes_per_second"}},
			`name "cupti_dram_read_bytes_per_second" must be cupti_<words>_bytes_total`},
		{"dram__bytes_read.sum.per_second", counter, []Rule{{Match: "dram__bytes_read.sum.per_second", Name: "cupti_bytes_per_second"}},
			"must be cupti_<words>_bytes_per_second"},
		{"dram__bytes_read.sum", counter, []Rule{{Regex: `dram__(\w+)\.sum`, Name: "cupti_$1_bytes_total"}}, `name "cupti_" must be`}, // $1_bytes is group "1_bytes"
		{"dram__bytes_read.sum", counter, []Rule{{Regex: `dram__(\w+)\.sum`, Name: "cupti_${1}_bytes_total"}}, ""},
		{"dram__bytes_read.sum", counter, []Rule{{Regex: `dram__bytes_read\.sum(x?)`, Name: "cupti_r_bytes_total", Labels: map[string]string{"k": "$1"}}},
			`label "k" expands to an empty value`},
		{"dram__bytes_read.sum", counter, []Rule{{Regex: `dram__bytes_read\.sum(x?)`, Name: "cupti_r_bytes_total", OTelName: "$1"}},
			`otel_name expands to ""`},
	}
	for _, tt := range tests {
		m, err := New(tt.rules...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = m.Map(tt.name, tt.props)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Map(%s): %v", tt.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Map(%s) error %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestMapCollision checks that a rule that gives two metrics the same series is refused at
// the second Map, naming the first owner, and that the refused metric claims nothing.
func TestMapCollision(t *testing.T) {
	m, err := New(Rule{Regex: `dram__bytes_(read|write)\.sum`, Name: "cupti_dram_bytes_total"})
	if err != nil {
		t.Fatal(err)
	}
	p := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "byte"}
	if _, err := m.Map("dram__bytes_read.sum", p); err != nil {
		t.Fatal(err)
	}
	_, err = m.Map("dram__bytes_write.sum", p)
	if err == nil || !strings.Contains(err.Error(), "already produced by dram__bytes_read.sum") {
		t.Fatalf("second owner: err %v", err)
	}
	// A derived name that happens to equal a rule's is refused too (the dram byte counters
	// are curated under their derived names, so this uses the sector counters).
	ps := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "sector"}
	plain, _ := New()
	read, err := plain.Map("dram__sectors_read.sum", ps)
	if err != nil {
		t.Fatal(err)
	}
	m, err = New(Rule{Match: "dram__sectors_write.sum", Name: read.Desc.Name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Map("dram__sectors_write.sum", ps); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Map("dram__sectors_read.sum", ps); err == nil {
		t.Fatal("derived name equal to a rule's name: no error")
	}
}

// TestUserRuleOverridesCurated checks that a user rule for a curated metric wins, and
// that a user rule reusing a curated name for another metric is refused at New.
func TestUserRuleOverridesCurated(t *testing.T) {
	full := "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	m, err := New(Rule{Match: full, Name: "cupti_streaming_multiprocessor_busy_ratio", Help: "Mine."})
	if err != nil {
		t.Fatal(err)
	}
	met, err := m.Map(full, pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "gpc_cycle"})
	if err != nil {
		t.Fatal(err)
	}
	if met.Desc.Name != "cupti_streaming_multiprocessor_busy_ratio" || !strings.HasPrefix(met.Desc.Help, "Mine.") {
		t.Errorf("override: got %s %q", met.Desc.Name, met.Desc.Help)
	}
	if met.Max.Name != "cupti_streaming_multiprocessor_busy_max_ratio" {
		t.Errorf("override max: %s", met.Max.Name)
	}
	_, err = New(Rule{Match: "sm__cycles_active_shader_cs.avg.pct_of_peak_sustained_elapsed", Name: "cupti_sm_active_ratio"})
	if err == nil || !strings.Contains(err.Error(), "collides with") {
		t.Errorf("reusing a curated name: err %v", err)
	}
}

// TestMapConcurrentSafe maps the same and different names from several goroutines (run
// with -race): every goroutine must get the one shared *Desc of a family.
func TestMapConcurrentSafe(t *testing.T) {
	m, _ := New()
	p := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "byte"}
	names := []string{"dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes_read.sum.per_second", "PCI.TriageCompute.pcie__read_bytes.sum"}
	const workers = 8
	got := make([][]*snapshot.Desc, workers)
	done := make(chan int)
	for w := 0; w < workers; w++ {
		go func(w int) {
			defer func() { done <- w }()
			for _, n := range names {
				met, err := m.Map(n, p)
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], met.Desc)
			}
		}(w)
	}
	for range workers {
		<-done
	}
	for w := 1; w < workers; w++ {
		if !slices.Equal(got[w], got[0]) {
			t.Errorf("worker %d got other descs than worker 0", w)
		}
	}
}

// TestCuratedCandidatesShareSeries maps every candidate of every curated metric that the
// GH100 catalog has: each must give the family of the metric's GH100 name (same *Desc, so the
// same name, unit, type, help and OTel name) and the same labels, on one Mapper.
func TestCuratedCandidatesShareSeries(t *testing.T) {
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	props := catalogProps(t)
	n := 0
	for _, c := range m.Curated() {
		first := mapFull(t, m, props, c.Perfworks)
		for _, k := range c.Candidates[1:] {
			pn, err := ParseName(k.Perfworks)
			if err != nil {
				t.Fatalf("%s: candidate %s: %v", c.Name, k.Perfworks, err)
			}
			if _, ok := props[pn.Base()]; !ok {
				continue // not a GH100 name; the per-chip tests of pmsample map it
			}
			n++
			met := mapFull(t, m, props, k.Perfworks)
			if met.Desc != first.Desc || !slices.Equal(met.Labels, first.Labels) || met.Scale != first.Scale {
				t.Errorf("%s: candidate %s maps to %s %v (scale %g), the GH100 name to %s %v (scale %g)",
					c.Name, k.Perfworks, met.Desc.Name, met.Labels, met.Scale, first.Desc.Name, first.Labels, first.Scale)
			}
		}
	}
	if n < 5 {
		t.Errorf("only %d candidates found in the GH100 catalog; the table's names look wrong", n)
	}
}
