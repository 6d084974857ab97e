package e2e

// TestDRAAgainstAPIServer attributes GPUs that Dynamic Resource Allocation gave to pods:
// the ResourceSlices NVIDIA's DRA driver publishes, the DeviceClass, ResourceClaims with
// the allocations the scheduler would write and the pods that use them are created in a
// real kube-apiserver (which validates them all); the exporter runs with the chart's RBAC
// (its ServiceAccount's token), and a PodResources gRPC server built from the kubelet's own
// API types answers from those objects what a kubelet with DRA answers. No kubelet,
// scheduler or GPU: the GPUs' series come from a generated recording of a 6-GPU node.
// It runs when KUBE_BIN_DIR names a folder holding kube-apiserver and etcd (.ci/run).

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/recording"
	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

const (
	draNode   = "gpu-node-1"
	gpuDriver = "gpu.nvidia.com"
	migUUID   = "MIG-5e0d0004-1111-5000-8000-000000000001" // the MIG device the driver made on GPU 4 (static MIG)
)

// draKubelet answers the PodResources List the way the kubelet does on a node with DRA
// (Kubernetes 1.34-1.37, KubeletPodResourcesDynamicResources on): for every pod of the
// node and each of its containers (restartable init containers too), the devices the
// device plugin gave it, and one DynamicResource per claim the container references whose
// allocation is prepared for the pod (reserved for it), with every device of that
// allocation, the CDI device IDs of a driver accumulated over its devices as the kubelet's
// GetDynamicResources does. It reads the pods and claims from the API server at each call.
type draKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	c            kubernetes.Interface
	devicePlugin map[string]string // "namespace/pod/container" -> GPU UUID the device plugin gave it

	mu    sync.Mutex
	calls int
}

func (k *draKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	k.calls++
	k.mu.Unlock()
	pods, err := k.c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", draNode).String()})
	if err != nil {
		return nil, err
	}
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, p := range pods.Items {
		pr := &podresourcesv1.PodResources{Name: p.Name, Namespace: p.Namespace}
		var ctrs []corev1.Container
		for _, c := range p.Spec.InitContainers {
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				ctrs = append(ctrs, c)
			}
		}
		for _, c := range append(ctrs, p.Spec.Containers...) {
			cr := &podresourcesv1.ContainerResources{Name: c.Name}
			if uuid, ok := k.devicePlugin[p.Namespace+"/"+p.Name+"/"+c.Name]; ok {
				cr.Devices = []*podresourcesv1.ContainerDevices{{ResourceName: "nvidia.com/gpu", DeviceIds: []string{uuid}}}
			}
			for _, prc := range p.Spec.ResourceClaims {
				for _, ref := range c.Resources.Claims {
					if ref.Name != prc.Name || prc.ResourceClaimName == nil {
						continue
					}
					claim, err := k.c.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, *prc.ResourceClaimName, metav1.GetOptions{})
					if err != nil || claim.Status.Allocation == nil || !reservedFor(claim, p.UID) {
						continue // not prepared for this pod: the kubelet does not list it
					}
					dr := &podresourcesv1.DynamicResource{ClaimName: claim.Name, ClaimNamespace: claim.Namespace}
					cdi := map[string][]*podresourcesv1.CDIDevice{}
					for _, res := range claim.Status.Allocation.Devices.Results {
						cdi[res.Driver] = append(cdi[res.Driver], &podresourcesv1.CDIDevice{Name: "k8s." + res.Driver + "/claim=" + string(claim.UID) + "-" + res.Device})
						dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{
							CdiDevices: cdi[res.Driver], DriverName: res.Driver, PoolName: res.Pool, DeviceName: res.Device})
					}
					cr.DynamicResources = append(cr.DynamicResources, dr)
				}
			}
			pr.Containers = append(pr.Containers, cr)
		}
		resp.PodResources = append(resp.PodResources, pr)
	}
	return resp, nil
}

func reservedFor(c *resourcev1.ResourceClaim, uid types.UID) bool {
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" && r.UID == uid {
			return true
		}
	}
	return false
}

// startDRAKubelet serves k on a Unix socket and returns its path.
func startDRAKubelet(t *testing.T, k *draKubelet) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, k)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock
}

// nodeRecording writes a recording of a node of n idle GPUs and returns its path and the
// GPUs' UUIDs, in order.
func nodeRecording(t *testing.T, n int) (string, []string) {
	t.Helper()
	var buf bytes.Buffer
	if err := demo.GenerateNode(&buf, "../testdata/gh100_pm_sampling_base_metrics.tsv", demo.NodeSpec{GPUs: n, Duration: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	rd, err := recording.NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for len(uuids) == 0 {
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("no devices in the generated recording: %v", err)
		}
		if ev.Type == recording.FrameDevices {
			for _, d := range ev.Devices {
				uuids = append(uuids, d.UUID)
			}
		}
	}
	path := filepath.Join(t.TempDir(), "node.cuptirec")
	write(t, path, buf.Bytes())
	return path, uuids
}

// installExporterRBAC renders the chart in node mode with values and creates its
// ServiceAccount, ClusterRole and ClusterRoleBinding; it returns the DaemonSet as rendered.
func installExporterRBAC(t *testing.T, ctx context.Context, c kubernetes.Interface, release string, values map[string]any) *appsv1.DaemonSet {
	t.Helper()
	files := func(f string) bool {
		return slices.Contains([]string{"serviceaccount.yaml", "rbac.yaml", "daemonset.yaml"}, f)
	}
	var ds *appsv1.DaemonSet
	for _, d := range renderChart(t, release, values, files) {
		if d.kind == "DaemonSet" {
			ds = &appsv1.DaemonSet{}
			d.decode(t, ds)
		} else {
			createRendered(t, ctx, c, d)
		}
	}
	if ds == nil {
		t.Fatal("the chart rendered no DaemonSet")
	}
	return ds
}

// chartArg returns the value of the exporter container's flag as the chart renders it.
func chartArg(t *testing.T, ds *appsv1.DaemonSet, flag string) string {
	t.Helper()
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	t.Fatalf("the chart passes no %s", flag)
	return ""
}

// gpuSlice is a ResourceSlice of NVIDIA's driver for node, laid out as it publishes them.
func gpuSlice(name, node string, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: gpuDriver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: devices}}
}

func sliceDevice(name string, kv ...string) resourcev1.Device {
	attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"productName": {StringValue: ptrTo("NVIDIA H200")}, "driverVersion": {VersionValue: ptrTo("580.65.6")}}
	for k := 0; k+1 < len(kv); k += 2 {
		attrs[resourcev1.QualifiedName(kv[k])] = resourcev1.DeviceAttribute{StringValue: ptrTo(kv[k+1])}
	}
	return resourcev1.Device{Name: name, Attributes: attrs,
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: resource.MustParse("141Gi")}}}
}

func ptrTo[T any](v T) *T { return &v }

// deviceSeries returns, per GPU UUID, the labels of the device series of the scrape (every
// family with a uuid label and pod labels the exporter set), and how many there are.
func deviceSeries(fams map[string]*dto.MetricFamily) map[string][]map[string]string {
	out := map[string][]map[string]string{}
	for name, f := range fams {
		if name == "cupti_podresources_claim_info" {
			continue
		}
		for _, m := range f.GetMetric() {
			ls := labels(m)
			if _, ok := ls["pod"]; ok && ls["uuid"] != "" && strings.HasPrefix(ls["uuid"], "GPU-") {
				if _, isDevice := ls["pid"]; !isDevice {
					ls["__name__"] = name
					out[ls["uuid"]] = append(out[ls["uuid"]], ls)
				}
			}
		}
	}
	return out
}

// seriesOnlyIn names the series of a that b lacks, by their labels other than the pod's.
func seriesOnlyIn(a, b []map[string]string) []string {
	key := func(ls map[string]string) string {
		var parts []string
		for k, v := range ls {
			if k != "namespace" && k != "pod" && k != "container" {
				parts = append(parts, k+"="+v)
			}
		}
		slices.Sort(parts)
		return strings.Join(parts, ",")
	}
	inB := map[string]bool{}
	for _, ls := range b {
		inB[key(ls)] = true
	}
	var out []string
	for _, ls := range a {
		if k := key(ls); !inB[k] {
			out = append(out, k)
		}
	}
	return out
}

func TestDRAAgainstAPIServer(t *testing.T) {
	begin := time.Now()
	ctx := context.Background()
	cfg, c := startAPIServer(t)
	recPath, gpus := nodeRecording(t, 6)
	for _, ns := range []string{whNamespace, "ml"} {
		createNamespace(t, ctx, c, ns, nil)
	}
	// The chart with its defaults, and a second release without the ResourceSlice rule.
	ds := installExporterRBAC(t, ctx, c, "cupti", nil)
	if got := chartArg(t, ds, "--kubernetes.resource-slices"); got != "on" {
		t.Fatalf("the chart passes --kubernetes.resource-slices=%s; want on", got)
	}
	kubeconfig := webhookKubeconfig(t, ctx, c, cfg.Host, ds.Spec.Template.Spec.ServiceAccountName)
	noSlices := installExporterRBAC(t, ctx, c, "noslices", map[string]any{"kubernetes": map[string]any{"resourceSlices": map[string]any{"enabled": false}}})
	forbiddenKubeconfig := webhookKubeconfig(t, ctx, c, cfg.Host, noSlices.Spec.Template.Spec.ServiceAccountName)

	// What NVIDIA's driver publishes for this node: whole GPUs with their uuid, a MIG device
	// that exists (uuid MIG-...) and a partition it creates on demand (no uuid). Another
	// node's slice names gpu-0 too, with another GPU: the informer must not see it.
	slicesOf := []*resourcev1.ResourceSlice{
		gpuSlice(draNode+"-gpu.nvidia.com-a", draNode,
			sliceDevice("gpu-0", "type", "gpu", "uuid", gpus[0]),
			sliceDevice("gpu-1", "type", "gpu", "uuid", gpus[1]),
			sliceDevice("gpu-3", "type", "gpu", "uuid", gpus[3])),
		gpuSlice(draNode+"-gpu.nvidia.com-b", draNode,
			sliceDevice("gpu-4-mig-1g18gb-19-0", "type", "mig", "uuid", migUUID, "parentUUID", gpus[4], "profile", "1g.18gb"),
			sliceDevice("gpu-5-mig-1g18gb-19-2", "type", "mig", "parentUUID", gpus[5], "profile", "1g.18gb")),
		gpuSlice("gpu-node-2-gpu.nvidia.com-a", "gpu-node-2", sliceDevice("gpu-0", "type", "gpu", "uuid", "GPU-0ther000-0000-4000-8000-000000000000")),
	}
	for _, s := range slicesOf {
		mustCreate(t, func() error {
			_, err := c.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
			return err
		})
	}
	mustCreate(t, func() error {
		_, err := c.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: gpuDriver},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver == 'gpu.nvidia.com'"}}}}}, metav1.CreateOptions{})
		return err
	})

	// Pods bound to the node, each container referencing its claim (or asking the device
	// plugin), then the claims allocated and reserved as the scheduler does.
	pod := func(name string, claims map[string]string, pluginGPU bool) *corev1.Pod {
		ctr := corev1.Container{Name: "main", Image: "pytorch"}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: draNode}}
		for ref, claim := range claims {
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: ref, ResourceClaimName: ptrTo(claim)})
			ctr.Resources.Claims = append(ctr.Resources.Claims, corev1.ResourceClaim{Name: ref})
		}
		if pluginGPU {
			ctr.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		}
		p.Spec.Containers = []corev1.Container{ctr}
		got, err := c.CoreV1().Pods("ml").Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s: %v", name, err)
		}
		return got
	}
	claim := func(name, device string, users ...*corev1.Pod) {
		cl, err := c.ResourceV1().ResourceClaims("ml").Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: gpuDriver}}}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating claim %s: %v", name, err)
		}
		cl.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "gpu", Driver: gpuDriver, Pool: draNode, Device: device}}}}
		for _, u := range users {
			cl.Status.ReservedFor = append(cl.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: u.Name, UID: u.UID})
		}
		if _, err := c.ResourceV1().ResourceClaims("ml").UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("allocating claim %s: %v", name, err)
		}
	}
	claim("train-gpu", "gpu-0", pod("trainer-0", map[string]string{"gpu": "train-gpu"}, false))
	claim("shared-gpu", "gpu-1", pod("infer-a", map[string]string{"gpu": "shared-gpu"}, false), pod("infer-b", map[string]string{"gpu": "shared-gpu"}, false))
	pod("legacy-0", nil, true) // the device plugin gives it GPU 2 on the same node
	claim("mig-static", "gpu-4-mig-1g18gb-19-0", pod("mig-0", map[string]string{"mig": "mig-static"}, false))
	claim("mig-dynamic", "gpu-5-mig-1g18gb-19-2", pod("mig-1", map[string]string{"mig": "mig-dynamic"}, false))
	// GPU 3 is in a slice and allocated to no one.

	k := &draKubelet{c: c, devicePlugin: map[string]string{"ml/legacy-0/main": gpus[2]}}
	sock := startDRAKubelet(t, k)
	setup := time.Since(begin)

	args := func(kc string) []string {
		return []string{"replay", recPath, "--replay.speed=0", "--pmsample.window=10m", "--kubelet.pod-resources-socket=" + sock,
			"--kubernetes.kubeconfig=" + kc, "--kubernetes.node-name=" + draNode, "--kubernetes.resource-slices=on"}
	}
	p := start(t, args(kubeconfig)...)
	forbidden := start(t, args(forbiddenKubeconfig)...)

	// The chart's RBAC: every device of this node mapped, the claims named.
	var fams map[string]*dto.MetricFamily
	testutil.WaitFor(t, "DRA devices mapped", 30*time.Second, 100*time.Millisecond, func() bool {
		_, fams = p.scrape(t)
		m, ok := find(fams, "cupti_podresources_dra_devices", map[string]string{"result": "gpu"})
		return ok && value(m) == 2
	})
	mapped := time.Since(begin) - setup
	for result, want := range map[string]float64{"gpu": 2, "mig": 1, "mig_not_found": 1, "unknown_device": 0, "no_uuid": 0, "no_resource_slices": 0} {
		if m, ok := find(fams, "cupti_podresources_dra_devices", map[string]string{"result": result}); !ok || value(m) != want {
			t.Errorf("dra_devices{result=%s} = %v; want %v", result, m, want)
		}
	}
	series := deviceSeries(fams)
	if len(series) != len(gpus) {
		t.Fatalf("device series of %d GPUs; want all %d", len(series), len(gpus))
	}
	owners := map[string]string{gpus[0]: "ml/trainer-0/main", gpus[2]: "ml/legacy-0/main"} // the rest: no one, or shared
	for i, uuid := range gpus {
		if len(series[uuid]) < 50 {
			t.Errorf("GPU %d: %d device series; want the recording's (about 59)", i, len(series[uuid]))
		}
		for _, ls := range series[uuid] {
			if got := ls["namespace"] + "/" + ls["pod"] + "/" + ls["container"]; got != owners[uuid] && !(owners[uuid] == "" && got == "//") {
				t.Errorf("GPU %d series %v: held by %q; want %q", i, ls, got, owners[uuid])
				break
			}
		}
	}
	claims := map[string][]string{}
	for _, m := range fams["cupti_podresources_claim_info"].GetMetric() {
		ls := labels(m)
		claims[ls["uuid"]] = append(claims[ls["uuid"]], ls["claim"]+" "+ls["device"]+" "+ls["namespace"]+"/"+ls["pod"]+"/"+ls["container"])
	}
	for uuid, want := range map[string][]string{
		gpus[0]: {"train-gpu gpu-0 ml/trainer-0/main"},
		gpus[1]: {"shared-gpu gpu-1 ml/infer-a/main", "shared-gpu gpu-1 ml/infer-b/main"},
		migUUID: {"mig-static gpu-4-mig-1g18gb-19-0 ml/mig-0/main"},
	} {
		if got := claims[uuid]; !slices.Equal(got, want) {
			t.Errorf("claim_info of %s: %q; want %q", uuid, got, want)
		}
	}
	if len(claims) != 3 {
		t.Errorf("claim_info names %d devices: %v; want 3", len(claims), claims)
	}
	for name, want := range map[string]float64{"cupti_resourceslices_synced": 1} {
		if m, ok := find(fams, name, nil); !ok || value(m) != want {
			t.Errorf("%s = %v; want %v", name, m, want)
		}
	}
	if m, ok := find(fams, "cupti_resourceslices_devices", map[string]string{"type": "gpu"}); !ok || value(m) != 3 {
		t.Errorf("slices devices{gpu} = %v; want the 3 of this node only", m)
	}
	for _, reason := range []string{"forbidden", "not_served", "other"} {
		if m, ok := find(fams, "cupti_resourceslices_watch_errors_total", map[string]string{"reason": reason}); !ok || value(m) != 0 {
			t.Errorf("watch errors{%s} = %v with the chart's RBAC; want 0", reason, m)
		}
	}

	// Without the ResourceSlice rule: forbidden, counted and logged; the device plugin's
	// GPU keeps its pod and every GPU keeps its series.
	testutil.WaitFor(t, "forbidden watch counted", 30*time.Second, 100*time.Millisecond, func() bool {
		_, fams = forbidden.scrape(t)
		m, ok := find(fams, "cupti_resourceslices_watch_errors_total", map[string]string{"reason": "forbidden"})
		return ok && value(m) > 0
	})
	testutil.WaitFor(t, "the kubelet's answer in the forbidden exporter", 30*time.Second, 100*time.Millisecond, func() bool {
		_, fams = forbidden.scrape(t)
		m, ok := find(fams, "cupti_podresources_dra_devices", map[string]string{"result": "unknown_device"})
		return ok && value(m) == 4
	})
	// Both replays over and attributed, the same recording's series on both sides.
	series = deviceSeries(steadyScrape(t, p, 3, 500*time.Millisecond))
	fams = steadyScrape(t, forbidden, 3, 500*time.Millisecond)
	forbiddenSeries := deviceSeries(fams)
	for i, uuid := range gpus {
		if len(forbiddenSeries[uuid]) != len(series[uuid]) {
			t.Errorf("GPU %d has %d device series without the ResourceSlice rule, %d with it; want the same; only without: %v; only with: %v",
				i, len(forbiddenSeries[uuid]), len(series[uuid]), seriesOnlyIn(forbiddenSeries[uuid], series[uuid]), seriesOnlyIn(series[uuid], forbiddenSeries[uuid]))
		}
		want := "//"
		if i == 2 {
			want = "ml/legacy-0/main"
		}
		for _, ls := range forbiddenSeries[uuid] {
			if got := ls["namespace"] + "/" + ls["pod"] + "/" + ls["container"]; got != want {
				t.Errorf("forbidden: GPU %d series held by %q; want %q", i, got, want)
				break
			}
		}
	}
	if !strings.Contains(forbidden.out.String(), "listing or watching ResourceSlices failed") || !strings.Contains(forbidden.out.String(), "reason=forbidden") {
		t.Error("the forbidden watch was not logged")
	}
	k.mu.Lock()
	calls := k.calls
	k.mu.Unlock()
	t.Logf("DRA end-to-end: API objects and fake kubelet set up in %s, devices mapped %s after; %d kubelet calls",
		setup.Round(time.Millisecond), mapped.Round(time.Millisecond), calls)
}
