package pipeline

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/kubepods"
)

func TestPodInformerSettings(t *testing.T) {
	for _, tc := range []struct {
		name, mode, flagNode, kubeconfig string
		env                              map[string]string
		node                             string
		on, err                          bool
	}{
		{"auto in a cluster", "auto", "", "", map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "NODE_NAME": "n1"}, "n1", true, false},
		{"auto without a node name", "auto", "", "", map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "", false, false},
		{"auto outside a cluster", "auto", "", "", map[string]string{"NODE_NAME": "n1"}, "n1", false, false},
		{"auto with a kubeconfig", "auto", "n2", "/k", nil, "n2", true, false},
		{"flag overrides env", "auto", "n2", "", map[string]string{"KUBERNETES_SERVICE_HOST": "h", "NODE_NAME": "n1"}, "n2", true, false},
		{"off", "off", "", "", map[string]string{"KUBERNETES_SERVICE_HOST": "h", "NODE_NAME": "n1"}, "n1", false, false},
		{"on without a node name", "on", "", "", nil, "", false, true},
		{"on", "on", "n3", "", nil, "n3", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Kubernetes.PodInformer, cfg.Kubernetes.NodeName, cfg.Kubernetes.Kubeconfig = tc.mode, tc.flagNode, tc.kubeconfig
			node, on, err := podInformerSettings(&cfg, func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err || on != tc.on || (!tc.err && node != tc.node) {
				t.Errorf("got node %q on %v err %v; want %q %v err %v", node, on, err, tc.node, tc.on, tc.err)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Kubernetes.PodInformer = "yes"
	if err := cfg.Validate(); err == nil {
		t.Error("pod_informer=yes accepted")
	}
}

// Two pods share one GPU on this node; each process is found from its real cgroup text
// through the informer, and the kernel and copy series carry each pod's labels.
func TestPodInformerTwoPodsOneGPU(t *testing.T) {
	const (
		node = "gpu-1"
		uidA = "0a1b2c3d-0000-4000-8000-00000000000a"
		uidB = "0a1b2c3d-0000-4000-8000-00000000000b"
		cidA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		cidB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	)
	mk := func(ns, name, uid, ctr, cid string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
			Spec:       corev1.PodSpec{NodeName: node},
			Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: ctr, ContainerID: "containerd://" + cid}}},
		}
	}
	client := fake.NewClientset(mk("team-a", "trainer", uidA, "main", cidA), mk("team-b", "infer", uidB, "server", cidB))
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

	agg := activity.NewAggregator(activity.WithPodResolver(podResolver(r)), activity.WithKernelHistogramSplit(activity.SplitGPU|activity.SplitPod))
	pa := &record.Process{PID: 7, DeviceUUIDs: []string{"GPU-1"}, Container: "stray",
		Cgroup: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b2c3d_0000_4000_8000_00000000000a.slice/cri-containerd-" + cidA + ".scope"}
	pb := &record.Process{PID: 7, DeviceUUIDs: []string{"GPU-1"},
		Cgroup: "12:memory:/kubepods/besteffort/pod" + uidB + "/" + cidB + "\n0::/\n"}
	host := &record.Process{PID: 8, DeviceUUIDs: []string{"GPU-1"}, Container: "stray", Cgroup: "0::/user.slice/user-1000.slice/session-1.scope"}
	pageable := record.Record{Kind: record.KindMemcpy, CopyKind: 1, SrcKind: 1, DstKind: 3, Bytes: 100, End: 10}
	for _, p := range []*record.Process{pa, pb, host} {
		agg.Connect(p)
		agg.Add(p, []record.Record{{Kind: record.KindKernel, Name: "_Z1kv", End: 1000}, pageable})
	}
	s := agg.Snapshot()
	want := map[string][][]string{
		"cupti_memcpy_bytes_total": {
			{"0", "GPU-1", "", "", "", "HtoD", "pageable", ""},
			{"0", "GPU-1", "team-a", "trainer", "main", "HtoD", "pageable", ""},
			{"0", "GPU-1", "team-b", "infer", "server", "HtoD", "pageable", ""},
		},
		"cupti_kernel_duration_seconds": {
			{"0", "GPU-1", "", "", "", "k"},
			{"0", "GPU-1", "team-a", "trainer", "main", "k"},
			{"0", "GPU-1", "team-b", "infer", "server", "k"},
		},
	}
	for _, f := range s.Families {
		w, ok := want[f.Desc.Name]
		if !ok {
			continue
		}
		var got [][]string
		for _, sm := range f.Samples {
			got = append(got, sm.LabelValues)
		}
		if !slices.EqualFunc(got, w, slices.Equal[[]string]) {
			t.Errorf("%s label sets %v, want %v", f.Desc.Name, got, w)
		}
		delete(want, f.Desc.Name)
	}
	if len(want) > 0 {
		t.Errorf("families missing: %v", want)
	}
}

// The informer's self-metrics pass the exporter's checks (names, kinds, label sets).
func TestPodInformerSelfMetrics(t *testing.T) {
	r, err := kubepods.New(fake.NewClientset(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	r.Lookup("0::/kubepods/pod0a1b2c3d-0000-4000-8000-00000000000a/" + strings.Repeat("a", 64))
	exp := exporter.New(slog.New(slog.DiscardHandler), exporter.WithoutRuntimeMetrics())
	exp.Register("kubepods", r)
	mfs, err := exp.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
		if mf.GetName() == "cupti_exporter_series_dropped_total" {
			for _, m := range mf.GetMetric() {
				if m.GetCounter().GetValue() != 0 {
					t.Errorf("series dropped: %v", m)
				}
			}
		}
	}
	for _, name := range []string{"cupti_kubepods_synced", "cupti_kubepods_pods", "cupti_kubepods_lookups_total", "cupti_kubepods_watch_errors_total"} {
		if !got[name] {
			t.Errorf("%s not gathered", name)
		}
	}
}

// In auto mode a pod without a service account token keeps serving, without the informer;
// with "on" the same is an error that names the remedy.
func TestStartPodInformerWithoutToken(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("NODE_NAME", "n1")
	logger := slog.New(slog.DiscardHandler)
	cfg := DefaultConfig()
	r, err := startPodInformer(context.Background(), logger, &cfg)
	if err != nil || r != nil {
		t.Errorf("auto without a token: %v, %v; want no informer and no error", r, err)
	}
	cfg.Kubernetes.PodInformer = "on"
	if _, err := startPodInformer(context.Background(), logger, &cfg); err == nil || !strings.Contains(err.Error(), "pod-informer=off") {
		t.Errorf("on without a token: %v, want an error naming --kubernetes.pod-informer=off", err)
	}
}
