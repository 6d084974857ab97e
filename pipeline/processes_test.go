package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/kubepods"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// An untraced pod is resolved from the cgroup of the PID NVML lists (the same informer as
// traced processes), and what the health source saw of it reaches the join: the device's
// bytes land on that pod's series marked source="nvml", and the untraced-present gauge says
// the GPU's time had an untraced process on it.
func TestUntracedPodFromNVML(t *testing.T) {
	const (
		node = "gpu-1"
		uid  = "0a1b2c3d-0000-4000-8000-00000000000c"
		cid  = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	)
	client := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: "notebook", UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "jupyter", ContainerID: "containerd://" + cid}}},
	})
	r, err := kubepods.New(client, node)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if !r.WaitForSync(sctx) {
		t.Fatal("no sync")
	}
	proc := t.TempDir()
	for pid, cg := range map[string]string{
		"4242": "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice/cri-containerd-" + cid + ".scope\n",
		"4343": "0::/user.slice/user-1000.slice/session-1.scope\n",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "cgroup"), []byte(cg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resolve := pidPodResolver(r, proc)
	if pod, ns, ctr, ok := resolve(4242); !ok || pod != "notebook" || ns != "lab" || ctr != "jupyter" {
		t.Errorf("pid 4242: %q %q %q %v, want lab/notebook/jupyter", ns, pod, ctr, ok)
	}
	for _, pid := range []uint32{4343, 999} { // not in a pod; gone
		if _, _, _, ok := resolve(pid); ok {
			t.Errorf("pid %d resolved to a pod", pid)
		}
	}

	a, _, _ := pcieJoin(t)
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	pod, ns, ctr, _ := resolve(4242)
	a.ObserveProcesses(gpuprocs.Observation{GPU: "0", UUID: "GPU-1", Start: t0, End: t0.Add(time.Second), Shares: true,
		Processes: []gpuprocs.Process{{PID: 4242, SMShare: 1, Namespace: ns, Pod: pod, Container: ctr}}})
	a.Add(pcieBatch(t0))
	a.Flush()
	var podBytes, present float64
	for _, f := range a.Snapshot().Families {
		for _, s := range f.Samples {
			l := map[string]string{}
			for i, n := range f.Desc.LabelNames {
				l[n] = s.LabelValues[i]
			}
			switch {
			case f.Desc.Name == "cupti_pod_pcie_bytes_total" && l["pod"] == "notebook" && l["source"] == "nvml":
				podBytes += s.Value
			case f.Desc.Name == "cupti_attribution_untraced_present_ratio":
				present = s.Value
			}
		}
	}
	if podBytes != 100_000 || present != 1 {
		t.Errorf("notebook pod (source=nvml) got %v bytes of 100000, untraced-present ratio %v (want 1)", podBytes, present)
	}
}

// pcieJoin is an attribution join of one GPU (index 0, GPU-1) sampling PCIe read bytes alone,
// with its devices and catalog.
func pcieJoin(t *testing.T) (*attribution.Attributor, []pmdata.Device, []pmdata.CatalogEntry) {
	t.Helper()
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	devices := []pmdata.Device{{Index: 0, UUID: "GPU-1"}}
	catalog := []pmdata.CatalogEntry{{Name: "PCI.TriageCompute.pcie__read_bytes.sum",
		Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"}}}
	a, err := attribution.New(devices, catalog, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, devices, catalog
}

// pcieBatch is pcieJoin's GPU's batch of 100 samples of 1 ms from t0, 1000 bytes each.
func pcieBatch(t0 time.Time) pmdata.Batch {
	var ss []pmdata.Sample
	for i := range 100 {
		s := uint64(t0.UnixNano()) + uint64(i)*1e6
		ss = append(ss, pmdata.Sample{Start: s, End: s + 1e6, Values: []float64{1000}})
	}
	return pmdata.Batch{Device: 0, Metrics: []string{"PCI.TriageCompute.pcie__read_bytes.sum"}, Samples: ss}
}
