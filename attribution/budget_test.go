package attribution

import (
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// The series budget: a device keeps the first n kernel labels, later kernels are attributed
// to "other" (nothing is lost: the totals still add up), and only the chosen per-kernel and
// per-pod families are served.
func TestSeriesBudget(t *testing.T) {
	a, _ := newTest(t, WithTopKernels(1), WithKernelFamilies([]string{"sm_active_seconds"}), WithPodFamilies([]string{}))
	p, info := newProc(7, "trainer", "0")
	a.ProcessConnected(p, info)
	a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 10*ms)}})
	a.Records(p, []record.Record{kernel(0, "A", t0, t0+ms), kernel(0, "B", t0+ms, t0+2*ms), kernel(0, "C", t0+2*ms, t0+3*ms)})
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 4, func(s, e int64) []float64 {
		return []float64{100, 1000}
	})})
	a.Flush()
	snap := a.Snapshot()
	var kernels []string
	for _, f := range snap.Families {
		if f.Desc.Name == "cupti_kernel_sampled_seconds_total" {
			for _, s := range f.Samples {
				kernels = append(kernels, s.LabelValues[2])
			}
		}
		if strings.HasPrefix(f.Desc.Name, "cupti_pod_") && f.Desc.Name != "cupti_pod_sampled_seconds_total" {
			t.Errorf("per-pod family %s served, none chosen", f.Desc.Name)
		}
		if f.Desc.Name == "cupti_kernel_pcie_bytes_total" {
			t.Error("cupti_kernel_pcie_bytes_total served, not chosen")
		}
	}
	if got := strings.Join(kernels, ","); got != "(idle),A,other" {
		t.Errorf("kernel labels %s, want (idle),A,other (B and C folded into other)", got)
	}
	if v, _ := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", "other"); !near(v, 0.002, 1e-9) {
		t.Errorf("other holds %v s, want B's and C's 0.002", v)
	}
	if v := sum(snap, "cupti_kernel_sm_active_seconds_total", "0", "GPU-aaaa"); !near(v, 0.004, 1e-9) {
		t.Errorf("SM active seconds add up to %v, want all 0.004", v)
	}
	if v, ok := value(snap, "cupti_pod_sampled_seconds_total", "0", "GPU-aaaa", "ns", "trainer", "c"); !ok || !near(v, 0.003, 1e-9) {
		t.Errorf("pod sampled %v (present %v), want 0.003: the denominator is always served", v, ok)
	}
}

// A family stem no sampled metric makes is refused with the ones that exist.
func TestUnknownFamilyRefused(t *testing.T) {
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(testDevices, testCatalog, m, nil, WithKernelFamilies([]string{"dram_reed_bytes"}))
	if err == nil || !strings.Contains(err.Error(), `"dram_reed_bytes"`) || !strings.Contains(err.Error(), "pcie_bytes") {
		t.Errorf("error %v, want one naming the stem and the known ones", err)
	}
	// A curated family the catalog lacks (no NVLink here) is accepted.
	if _, err := New(testDevices, testCatalog, m, nil, WithPodFamilies([]string{"nvlink_bytes", "tensor_pipe_active_seconds"})); err != nil {
		t.Errorf("curated families refused: %v", err)
	}
	if FamilyStem("cupti_pod_nvlink_bytes_total") != "nvlink_bytes" {
		t.Error(FamilyStem("cupti_pod_nvlink_bytes_total"))
	}
}
