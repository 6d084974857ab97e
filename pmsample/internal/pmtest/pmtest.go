// Package pmtest holds what the tests of pmsample and its subpackages share: the fake
// libcupti opened for a test, chip captures taken from it, the metric names the tests
// sample, and series looked up in a snapshot. Only tests import it.
package pmtest

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// The fake libcupti (internal/cupti/fake) has 2 GH100 devices, the GH100 catalog, passes =
// ceil(n/8) (19 with sm__throughput) and injectable faults.

// OpenFake builds and opens the fake libcupti; it is closed when the test ends.
func OpenFake(t testing.TB) *cupti.Lib {
	t.Helper()
	lib, err := cupti.Open(cuptitest.Build(t))
	if err != nil {
		t.Fatalf("opening the fake libcupti: %v", err)
	}
	t.Cleanup(func() { _ = lib.Close() })
	return lib
}

// Metrics of the fake's GH100 catalog the tests sample.
const (
	Gr     = "gr__cycles_active.avg.pct_of_peak_sustained_elapsed"
	SM     = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	Dram   = "dram__cycles_active.avg.pct_of_peak_sustained_elapsed"
	PCIeRx = "pcie__read_bytes.sum"
	PCIeTx = "pcie__write_bytes.sum"
)

// FakeMetrics returns n valid one-pass full names of the catalog.
func FakeMetrics(n int) []string {
	bases := []string{"gr__cycles_active", "sm__cycles_active", "dram__cycles_active", "pcie__read_bytes", "pcie__write_bytes",
		"gr__cycles_elapsed", "dram__bytes_read", "dram__bytes_write", "sm__inst_executed", "dram__sectors", "sm__warps_active"}
	out := make([]string, n)
	for i := range out {
		out[i] = bases[i] + ".sum"
	}
	return out
}

// FakeTriageCompute is the fake's GH100 set TriageCompute from version 130200
// (internal/cupti/fake/README.md).
var FakeTriageCompute = []string{
	"gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
	"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
	"sm__warps_active.avg.pct_of_peak_sustained_active",
	"dram__throughput.avg.pct_of_peak_sustained_elapsed",
	"pcie__read_bytes.sum.per_second",
	"pcie__write_bytes.sum.per_second",
}

// Curated is the curated metric list of the default mapping.
func Curated(t testing.TB) []mapping.CuratedMetric {
	t.Helper()
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	return m.Curated()
}

// The fake serves a chip from a capture (`metrics chips --capture`) when given the knobs
// catalogs=DIR (the unpacked captures) and chip=NAME (the devices' chip): its catalog, and the
// pass counts CUPTI gave for it. A pass count the capture never measured is counted in the
// fake's passes_unknown and answered 2.

// Captured reads the resolved set and the left-out metrics a capture recorded.
func Captured(t testing.TB, dir, chip string) (resolved []string, passes string, missing map[string]string) {
	t.Helper()
	read := func(kind string) [][]string {
		f, err := os.Open(filepath.Join(dir, chip+".passes"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		facts, err := catalog.ReadCaptureFacts(f, kind)
		if err != nil {
			t.Fatal(err)
		}
		return facts
	}
	r := read("resolved")
	if len(r) != 1 || len(r[0]) != 3 {
		t.Fatalf("%s: want one resolved line, got %q", chip, r)
	}
	missing = map[string]string{}
	for _, m := range read("missing") {
		missing[m[1]] = m[2]
	}
	return strings.Split(r[0][2], ","), r[0][1], missing
}

// CaptureFake captures chips from the fake in its default mode (the GH100 list for every chip,
// passes ceil(n/8)) as `metrics chips --capture` does, and unpacks them as cuptitest does.
func CaptureFake(t testing.TB, lib *cupti.Lib, chips ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, chip := range chips {
		c, err := catalog.Open(lib, chip)
		if err != nil {
			t.Fatal(err)
		}
		cc, err := c.Capture(Curated(t))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := catalog.WriteCapture(dir, cc, "test capture of the fake"); err != nil {
			t.Fatal(err)
		}
		gunzipFile(t, filepath.Join(dir, chip+".tsv.gz"), filepath.Join(dir, chip+".tsv"))
	}
	return dir
}

func gunzipFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ValueOf finds the series of family name for device d and the extra label values.
func ValueOf(s *snapshot.Snapshot, d pmdata.Device, name string, extra ...string) (float64, bool) {
	smp, ok := sampleOf(s, d, name, extra...)
	return smp.Value, ok
}

// HistogramOf is ValueOf for a histogram family.
func HistogramOf(s *snapshot.Snapshot, d pmdata.Device, name string, extra ...string) (snapshot.HistogramValue, bool) {
	smp, ok := sampleOf(s, d, name, extra...)
	if !ok || smp.Histogram == nil {
		return snapshot.HistogramValue{}, false
	}
	return *smp.Histogram, true
}

func sampleOf(s *snapshot.Snapshot, d pmdata.Device, name string, extra ...string) (snapshot.Sample, bool) {
	want := append([]string{strconv.Itoa(d.Index), d.UUID, d.Model, d.Chip, d.PCIBusID}, extra...)
	for _, f := range s.Families {
		if f.Desc.Name != name {
			continue
		}
		for _, smp := range f.Samples {
			if slices.Equal(smp.LabelValues, want) {
				return smp, true
			}
		}
	}
	return snapshot.Sample{}, false
}
