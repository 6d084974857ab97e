package exporter

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestOpenMetricsUnit: OpenMetrics output carries # UNIT for families whose name ends in
// their unit, and none where it does not (Prometheus's parser rejects such a unit).
func TestOpenMetricsUnit(t *testing.T) {
	e := New(nil, WithoutRuntimeMetrics())
	odd := &snapshot.Desc{Name: "cupti_odd_total", Kind: snapshot.KindCounter, Unit: "bytes", Help: "Unit not in the name."}
	e.Register("pm", newFakeProducer(pmSnapshot()))
	e.Register("odd", newFakeProducer(&snapshot.Snapshot{Time: testTime, Families: []snapshot.Family{{Desc: odd, Samples: []snapshot.Sample{{Value: 1}}}}}))
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeOpenMetrics))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	out := buf.String()
	for _, want := range []string{"# UNIT cupti_pcie_bytes bytes\n", "# UNIT cupti_sm_active_ratio ratio\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("OpenMetrics output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "# UNIT cupti_odd") {
		t.Errorf("unit written for a family whose name does not end in it:\n%s", out)
	}
}
