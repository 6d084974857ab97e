package pipeline

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"google.golang.org/grpc"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/podresources"
	"github.com/cupti-exporter/cupti-exporter/resourceslices"
)

func TestResourceSliceSettings(t *testing.T) {
	const sock = "/var/lib/kubelet/pod-resources/kubelet.sock"
	for _, tc := range []struct {
		name, mode, socket, flagNode, kubeconfig string
		env                                      map[string]string
		on, err                                  bool
	}{
		{"auto in a cluster", "auto", sock, "", "", map[string]string{"KUBERNETES_SERVICE_HOST": "h", "NODE_NAME": "n1"}, true, false},
		{"auto without the PodResources API", "auto", "", "", "", map[string]string{"KUBERNETES_SERVICE_HOST": "h", "NODE_NAME": "n1"}, false, false},
		{"auto without a node name", "auto", sock, "", "", map[string]string{"KUBERNETES_SERVICE_HOST": "h"}, false, false},
		{"auto outside a cluster", "auto", sock, "n1", "", nil, false, false},
		{"auto with a kubeconfig", "auto", sock, "n1", "/k", nil, true, false},
		{"off", "off", sock, "n1", "/k", nil, false, false},
		{"on", "on", sock, "n1", "", nil, true, false},
		{"on without a node name", "on", sock, "", "", nil, false, true},
		{"on without the PodResources API", "on", "", "n1", "", nil, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Kubernetes.ResourceSlices, cfg.Kubelet.PodResourcesSocket = tc.mode, tc.socket
			cfg.Kubernetes.NodeName, cfg.Kubernetes.Kubeconfig = tc.flagNode, tc.kubeconfig
			_, on, err := resourceSliceSettings(&cfg, func(k string) string { return tc.env[k] })
			if (err != nil) != tc.err || on != tc.on {
				t.Errorf("on %v err %v; want on %v err %v", on, err, tc.on, tc.err)
			}
		})
	}
	cfg := DefaultConfig()
	cfg.Kubernetes.ResourceSlices = "yes"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "resource_slices") {
		t.Errorf("resource_slices=yes: %v; want refused", err)
	}
}

// In auto mode a pod without a service account token serves without the ResourceSlice
// informer (DRA devices counted as such); with "on" it is an error naming the remedy.
func TestResourceSlicesWithoutToken(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	t.Setenv("NODE_NAME", "n1")
	cfg := DefaultConfig()
	cfg.Kubelet.PodResourcesSocket = filepath.Join(t.TempDir(), "kubelet.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pods, slices, err := newPodResources(ctx, slog.New(slog.DiscardHandler), &cfg, pmSetup{})
	if err != nil || pods == nil || slices != nil {
		t.Errorf("auto without a token: %v, %v, %v; want the map without the informer", pods, slices, err)
	}
	if pods != nil {
		pods.Close()
	}
	cfg.Kubernetes.ResourceSlices = "on"
	if _, _, err := newPodResources(ctx, slog.New(slog.DiscardHandler), &cfg, pmSetup{}); err == nil || !strings.Contains(err.Error(), "resource-slices=off") {
		t.Errorf("on without a token: %v; want an error naming --kubernetes.resource-slices=off", err)
	}
}

// kubelet answers List with fixed pod resources on a Unix socket.
type kubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	pods []*podresourcesv1.PodResources
}

func (k *kubelet) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// The whole chain for a MIG device NVIDIA's driver creates on demand: the kubelet names the
// claim's device, the driver's ResourceSlice lists it without a uuid under its parent GPU,
// and NVML (go-nvml's mock) lists the GPU instance the driver created at that profile and
// placement; the claim's holder is then known by the MIG UUID, the ResourceSlice arriving
// after the kubelet's answer included.
func TestDynamicMIGThroughNVML(t *testing.T) {
	const migUUID = "MIG-2b7e1f3c-0000-5000-8000-0000000000a1"
	srv := dgxh100.NewWithGPUs(gpus.H100_SXM5_80GB)
	gpu := srv.Devices[0].(*server.Device)
	unsupportedByDefault(&gpu.Device)
	gpu.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	gpu.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	gpu.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i != 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return &mock.Device{
			GetUUIDFunc:              func() (string, nvml.Return) { return migUUID, nvml.SUCCESS },
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return 3, nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
			GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 10 << 30}, nvml.SUCCESS },
			GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 1g.10gb", nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	gpu.GetGpuInstanceByIdFunc = func(int) (nvml.GpuInstance, nvml.Return) {
		return &mock.GpuInstance{GetInfoFunc: func() (nvml.GpuInstanceInfo, nvml.Return) {
			return nvml.GpuInstanceInfo{Id: 3, ProfileId: 19, Placement: nvml.GpuInstancePlacement{Start: 6, Size: 1}}, nvml.SUCCESS
		}}, nvml.SUCCESS
	}
	src := health.New(srv, nil, health.WithoutEvents(), health.WithInterval(10*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go src.Run(ctx)
	nv := &nvmlGPUs{}
	nv.src.Store(src)

	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(g, &kubelet{pods: []*podresourcesv1.PodResources{{Namespace: "ml", Name: "mig-pod",
		Containers: []*podresourcesv1.ContainerResources{{Name: "main", DynamicResources: []*podresourcesv1.DynamicResource{{
			ClaimName: "mig-claim", ClaimNamespace: "ml", ClaimResources: []*podresourcesv1.ClaimResource{{
				DriverName: podresources.GPUDriver, PoolName: "node-1", DeviceName: "gpu-0-mig-1g10gb-19-6"}}}}}}}}})
	go g.Serve(l)
	defer g.Stop()

	client := fake.NewClientset()
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices"}}}}
	pods := (*podresources.Client)(nil)
	slices, err := resourceslices.New(client, podresources.GPUDriver, "node-1", resourceslices.WithMIGLookup(migLookup(nv)),
		resourceslices.WithOnChange(func() { pods.Rebuild() }))
	if err != nil {
		t.Fatal(err)
	}
	if pods, err = podresources.New(sock, podresources.WithDRA(slices.Resolve)); err != nil {
		t.Fatal(err)
	}
	defer pods.Close()
	go slices.Run(ctx)
	if !slices.WaitForSync(ctx) {
		t.Fatal("slices not synced")
	}
	if err := pods.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := pods.Lookup(migUUID); ok {
		t.Fatal("the MIG device is attributed before its ResourceSlice exists")
	}
	node := "node-1"
	slice := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu.nvidia.com-x"}, Spec: resourcev1.ResourceSliceSpec{
		Driver: podresources.GPUDriver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: "node-1", Generation: 1, ResourceSliceCount: 1},
		Devices: []resourcev1.Device{{Name: "gpu-0-mig-1g10gb-19-6", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
			"type": {StringValue: ptr("mig")}, "parentUUID": {StringValue: ptr(gpu.UUID)}, "profile": {StringValue: ptr("1g.10gb")}}}}}}
	if _, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the MIG device attributed to its pod", 5*time.Second, 10*time.Millisecond, func() bool {
		pod, ns, ctr, ok := pods.Lookup(migUUID)
		return ok && pod == "mig-pod" && ns == "ml" && ctr == "main"
	})
	if _, _, _, ok := pods.Lookup(gpu.UUID); ok {
		t.Error("the parent GPU is credited to the pod that holds one MIG device of it")
	}
}

func ptr(s string) *string { return &s }

// unsupportedByDefault makes every call of d that the mock leaves unset answer
// ERROR_NOT_SUPPORTED with zero values, as NVML does for a feature a GPU lacks (the health
// source then leaves that metric out), instead of the mock's panic.
func unsupportedByDefault(d *mock.Device) {
	v := reflect.ValueOf(d).Elem()
	ret := reflect.TypeFor[nvml.Return]()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() != reflect.Func || !f.IsNil() || !f.CanSet() {
			continue
		}
		ft := f.Type()
		f.Set(reflect.MakeFunc(ft, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, ft.NumOut())
			for k := range out {
				out[k] = reflect.Zero(ft.Out(k))
				if ft.Out(k) == ret {
					out[k] = reflect.ValueOf(nvml.ERROR_NOT_SUPPORTED)
				}
			}
			return out
		}))
	}
}
