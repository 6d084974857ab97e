package kubepods

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

const node = "gpu-node-1"

func pod(ns, name, uid, node string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
			Labels: map[string]string{"app": name}, Annotations: map[string]string{"big": "annotation"}},
		Spec: corev1.PodSpec{NodeName: node},
	}
	for i := 0; i+1 < len(containers); i += 2 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: containers[i], Image: "x"})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses,
			corev1.ContainerStatus{Name: containers[i], ContainerID: containers[i+1], Image: "x"})
	}
	return p
}

func cgroupV2(uid, cid string) string {
	s := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uid + ".slice"
	if cid != "" {
		s += "/cri-containerd-" + cid + ".scope"
	}
	return s + "\n"
}

func cgroupfs(uid, cid string) string {
	return "11:memory:/kubepods/besteffort/pod" + uid + "/" + cid + "\n"
}

func hexID(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func startResolver(t *testing.T, client *fake.Clientset) *Resolver {
	t.Helper()
	r, err := New(client, node)
	if err != nil {
		t.Fatal(err)
	}
	testutil.RunUntilCleanup(t, func(ctx context.Context) error { r.Run(ctx); return nil })
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if !r.WaitForSync(sctx) {
		t.Fatal("pod cache did not sync")
	}
	return r
}

// eventually polls f until it is true or 5 s pass.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 5*time.Second, 5*time.Millisecond, f)
}

func TestResolver(t *testing.T) {
	const (
		uidA = "aaaaaaaa-0000-4000-8000-000000000001"
		uidB = "bbbbbbbb-0000-4000-8000-000000000002"
		uidO = "cccccccc-0000-4000-8000-000000000003" // on another node
		uidS = "dddddddd-0000-4000-8000-000000000004" // mirror pod's own UID
		hash = "0123456789abcdef0123456789abcdef"     // static pod's cgroup UID
	)
	cA1, cA2, cB, cO, cS := hexID('1'), hexID('2'), hexID('3'), hexID('4'), hexID('5')
	static := pod("kube-system", "gpu-static-"+node, uidS, node, "probe", "cri-o://"+cS)
	static.Annotations[mirrorAnnotation] = hash
	client := fake.NewClientset(
		pod("ml", "trainer-0", uidA, node, "main", "containerd://"+cA1, "sidecar", "containerd://"+cA2),
		pod("ml", "trainer-1", uidB, node, "main", "containerd://"+cB),
		pod("ml", "elsewhere", uidO, "gpu-node-2", "main", "containerd://"+cO),
		static,
	)
	r := startResolver(t, client)

	us := func(u string) string { // systemd escaping
		b := []byte(u)
		for i := range b {
			if b[i] == '-' {
				b[i] = '_'
			}
		}
		return string(b)
	}
	for _, tc := range []struct {
		name, cgroup string
		want         Container
		res          Result
	}{
		{"systemd containerd", cgroupV2(us(uidA), cA1), Container{"trainer-0", "ml", "main"}, Found},
		{"second container of the pod", cgroupV2(us(uidA), cA2), Container{"trainer-0", "ml", "sidecar"}, Found},
		{"cgroupfs", cgroupfs(uidB, cB), Container{"trainer-1", "ml", "main"}, Found},
		{"pod cgroup without a container", cgroupV2(us(uidB), ""), Container{"trainer-1", "ml", ""}, Found},
		{"static pod by its mirror annotation", cgroupfs(hash, cS), Container{"gpu-static-" + node, "kube-system", "probe"}, Found},
		{"container not reported yet", cgroupV2(us(uidA), hexID('9')), Container{"trainer-0", "ml", ""}, Pending},
		{"pod of another node", cgroupV2(us(uidO), cO), Container{}, Pending},
		{"unknown pod", cgroupfs("eeeeeeee-0000-4000-8000-000000000005", cA1), Container{}, Pending},
		{"not in a pod", "0::/user.slice/user-1000.slice/session-2.scope", Container{}, NotInPod},
		{"private cgroup namespace", "0::/\n", Container{}, NotInPod},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res := r.Lookup(tc.cgroup)
			if got != tc.want || res != tc.res {
				t.Errorf("Lookup = %+v, %v; want %+v, %v", got, res, tc.want, tc.res)
			}
		})
	}

	// The list and the watch asked the API server for this node's pods only.
	var lists, watches int
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "pods" {
			continue
		}
		var fs string
		switch a := a.(type) {
		case k8stesting.ListAction:
			lists++
			fs = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchAction:
			watches++
			fs = a.GetWatchRestrictions().Fields.String()
		default:
			continue
		}
		if fs != "spec.nodeName="+node {
			t.Errorf("%s pods with field selector %q, want spec.nodeName=%s", a.GetVerb(), fs, node)
		}
	}
	if lists == 0 || watches == 0 {
		t.Errorf("%d lists and %d watches of pods, want both", lists, watches)
	}

	// The cache holds trimmed pods: no labels, specs or images.
	objs, _ := r.informer.GetIndexer().ByIndex(uidIndex, uidA)
	if len(objs) != 1 {
		t.Fatalf("%d pods by UID %s, want 1", len(objs), uidA)
	}
	if p := objs[0].(*corev1.Pod); p.Labels != nil || p.Annotations != nil || p.Spec.Containers != nil || p.Status.ContainerStatuses[0].Image != "" {
		t.Errorf("cached pod not trimmed: %+v", p)
	}

	// A container the kubelet reports later resolves once the watch delivers it; a deleted
	// pod stops resolving.
	late := hexID('9')
	p, err := client.CoreV1().Pods("ml").Get(context.Background(), "trainer-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "late", ContainerID: "containerd://" + late})
	if _, err := client.CoreV1().Pods("ml").UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the late container", func() bool {
		c, res := r.Lookup(cgroupV2(us(uidA), late))
		return res == Found && c == Container{"trainer-0", "ml", "late"}
	})
	if err := client.CoreV1().Pods("ml").Delete(context.Background(), "trainer-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the deleted pod to go", func() bool {
		_, res := r.Lookup(cgroupfs(uidB, cB))
		return res == Pending
	})

	s := r.Snapshot()
	want := map[string]float64{"cupti_kubepods_synced": 1, "cupti_kubepods_pods": 3, "cupti_kubepods_watch_errors_total": 0}
	for _, f := range s.Families {
		if v, ok := want[f.Desc.Name]; ok && f.Samples[0].Value != v {
			t.Errorf("%s = %g, want %g", f.Desc.Name, f.Samples[0].Value, v)
		}
		if f.Desc.Name == "cupti_kubepods_lookups_total" {
			for _, sm := range f.Samples {
				if sm.LabelValues[0] == "not_in_pod" && sm.Value != 2 {
					t.Errorf("not_in_pod lookups = %g, want 2", sm.Value)
				}
				if sm.LabelValues[0] == "found" && sm.Value < 5 {
					t.Errorf("found lookups = %g, want at least 5", sm.Value)
				}
			}
		}
	}
	checkDescs(t, s)
}

func TestResolverPendingBeforeSync(t *testing.T) {
	const uid = "aaaaaaaa-0000-4000-8000-000000000001"
	r, err := New(fake.NewClientset(pod("ml", "p", uid, node, "main", "containerd://"+hexID('1'))), node)
	if err != nil {
		t.Fatal(err)
	}
	// Not running: the cache is empty and not synced, so a pod cgroup is pending, not absent.
	if c, res := r.Lookup(cgroupfs(uid, hexID('1'))); res != Pending || c != (Container{}) {
		t.Errorf("before sync: %+v, %v; want pending", c, res)
	}
	if _, res := r.Lookup("0::/"); res != NotInPod {
		t.Errorf("before sync, no pod cgroup: %v, want not_in_pod", res)
	}
	for _, f := range r.Snapshot().Families {
		if f.Desc.Name == "cupti_kubepods_synced" && f.Samples[0].Value != 0 {
			t.Errorf("synced = %g before Run", f.Samples[0].Value)
		}
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(fake.NewClientset(), ""); err == nil {
		t.Error("New without a node name succeeded")
	}
	if _, err := New(nil, node); err == nil {
		t.Error("New without a client succeeded")
	}
	if _, err := NewClient("/nonexistent/kubeconfig"); err == nil {
		t.Error("NewClient with a missing kubeconfig succeeded")
	}
}

func checkDescs(t *testing.T, s *snapshot.Snapshot) {
	t.Helper()
	descs := map[*snapshot.Desc]bool{}
	for _, d := range Descs() {
		descs[d] = true
	}
	for _, f := range s.Families {
		if !descs[f.Desc] {
			t.Errorf("family %s not in Descs", f.Desc.Name)
		}
		for _, sm := range f.Samples {
			if len(sm.LabelValues) != len(f.Desc.LabelNames) {
				t.Errorf("%s: %d label values for %v", f.Desc.Name, len(sm.LabelValues), f.Desc.LabelNames)
			}
		}
	}
}

func TestStripRuntime(t *testing.T) {
	cid := hexID('8')
	for in, want := range map[string]string{
		"containerd://" + cid: cid, "cri-o://" + cid: cid, "docker://" + cid: cid, cid: cid, "": "",
	} {
		if got := StripRuntime(in); got != want {
			t.Errorf("StripRuntime(%q) = %q, want %q", in, got, want)
		}
	}
}
