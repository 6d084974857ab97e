package resourceslices

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/podresources"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

func str(s string) *string { return &s }

// attrs are device attributes as NVIDIA's driver writes them (unqualified names, in the
// driver's domain), with some of the others it publishes beside the ones Resolve reads.
func attrs(kv ...string) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
	m := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"productName":   {StringValue: str("NVIDIA H100 80GB HBM3")},
		"architecture":  {StringValue: str("Hopper")},
		"driverVersion": {VersionValue: str("580.65.6")},
	}
	for k := 0; k+1 < len(kv); k += 2 {
		m[resourcev1.QualifiedName(kv[k])] = resourcev1.DeviceAttribute{StringValue: str(kv[k+1])}
	}
	return m
}

// gpuSlice is one slice of pool node-1 on node node-1 at generation gen, laid out as the
// driver publishes with dynamic MIG on (KEP-4815 partitionable devices): the full GPU with
// its uuid, and its MIG partitions with type, parentUUID and no uuid.
func gpuSlice(name string, gen int64, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: podresources.GPUDriver, NodeName: str("node-1"),
			Pool:    resourcev1.ResourcePool{Name: "node-1", Generation: gen, ResourceSliceCount: 1},
			Devices: devices,
		},
	}
}

func device(name string, a map[resourcev1.QualifiedName]resourcev1.DeviceAttribute) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: a, Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
		"memory": {Value: resource.MustParse("80Gi")}}}
}

// servedClient is a fake clientset whose discovery lists resource.k8s.io/v1 ResourceSlices,
// as a Kubernetes 1.34 or later API server does.
func servedClient(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	client.Resources = []*metav1.APIResourceList{{GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}}}}
	return client
}

func startInformer(t *testing.T, objs []runtime.Object, opts ...Option) (*Informer, *fake.Clientset) {
	t.Helper()
	client := servedClient(objs...)
	i, err := New(client, podresources.GPUDriver, "node-1", opts...)
	if err != nil {
		t.Fatal(err)
	}
	testutil.RunUntilCleanup(t, func(ctx context.Context) error { i.Run(ctx); return nil })
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if !i.WaitForSync(wctx) {
		t.Fatal("cache not synced")
	}
	return i, client
}

func wantResolve(t *testing.T, i *Informer, pool, name, uuid, result string) {
	t.Helper()
	gotUUID, gotResult := i.Resolve(pool, name)
	if gotUUID != uuid || gotResult != result {
		t.Errorf("Resolve(%s, %s) = %q, %q; want %q, %q", pool, name, gotUUID, gotResult, uuid, result)
	}
}

func TestResolveGPUsStaticAndDynamicMIG(t *testing.T) {
	const gpu0, gpu1 = "GPU-4f2e6b1c-0a9d-4c3e-8b7a-112233445566", "GPU-7d1c3b5a-2e4f-4a6b-9c8d-665544332211"
	const migStatic, migDynamic = "MIG-0c1d2e3f-4a5b-5c6d-8e7f-001122334455", "MIG-9a8b7c6d-5e4f-5a3b-8c2d-998877665544"
	slices := []runtime.Object{
		gpuSlice("node-1-gpu-0", 3,
			device("gpu-0", attrs("type", "gpu", "uuid", gpu0)),
			// A MIG device that exists (static MIG): its uuid is published.
			device("gpu-0-mig-1g10gb-19-0", attrs("type", "mig", "uuid", migStatic, "parentUUID", gpu0, "profile", "1g.10gb"))),
		gpuSlice("node-1-gpu-1", 3,
			device("gpu-1", attrs("type", "gpu", "uuid", gpu1)),
			// Partitions created on demand (dynamic MIG): no uuid until a claim is prepared.
			device("gpu-1-mig-1g10gb-19-2", attrs("type", "mig", "parentUUID", gpu1, "profile", "1g.10gb")),
			device("gpu-1-mig-3g40gb-9-4", attrs("type", "mig", "parentUUID", gpu1, "profile", "3g.40gb")),
			device("gpu-1-mig-weird", attrs("type", "mig", "parentUUID", gpu1)),
			device("gpu-1-vf", attrs("type", "vfio"))),
	}
	var asked atomic.Value
	lookup := func(parent string, profile, start int) (string, bool) {
		asked.Store([3]any{parent, profile, start})
		if parent == gpu1 && profile == 19 && start == 2 {
			return migDynamic, true // NVML lists the GPU instance the driver created
		}
		return "", false
	}
	i, _ := startInformer(t, slices, WithMIGLookup(lookup))

	wantResolve(t, i, "node-1", "gpu-0", gpu0, podresources.ResultGPU)
	wantResolve(t, i, "node-1", "gpu-1", gpu1, podresources.ResultGPU)
	wantResolve(t, i, "node-1", "gpu-0-mig-1g10gb-19-0", migStatic, podresources.ResultMIG)
	wantResolve(t, i, "node-1", "gpu-1-mig-1g10gb-19-2", migDynamic, podresources.ResultMIG)
	if got := asked.Load().([3]any); got != [3]any{gpu1, 19, 2} {
		t.Errorf("MIG lookup asked %v; want parent %s, profile 19, placement 2", got, gpu1)
	}
	wantResolve(t, i, "node-1", "gpu-1-mig-3g40gb-9-4", "", podresources.ResultMIGNotFound) // not created (yet)
	wantResolve(t, i, "node-1", "gpu-1-mig-weird", "", podresources.ResultNoUUID)
	wantResolve(t, i, "node-1", "gpu-1-vf", "", podresources.ResultNoUUID)
	wantResolve(t, i, "node-1", "gpu-7", "", podresources.ResultUnknownDevice)
	wantResolve(t, i, "node-2", "gpu-0", "", podresources.ResultUnknownDevice)

	s := i.Snapshot()
	for typ, want := range map[string]float64{"gpu": 2, "mig": 4, "other": 1} {
		if v := sample(t, s, "cupti_resourceslices_devices", typ); v != want {
			t.Errorf("devices{type=%s} = %v; want %v", typ, v, want)
		}
	}
	if v := sample(t, s, "cupti_resourceslices_synced"); v != 1 {
		t.Errorf("synced = %v; want 1", v)
	}
}

func TestResolveWithoutMIGLookup(t *testing.T) {
	i, _ := startInformer(t, []runtime.Object{gpuSlice("s", 1,
		device("gpu-0-mig-1g10gb-19-0", attrs("type", "mig", "parentUUID", "GPU-1")))})
	wantResolve(t, i, "node-1", "gpu-0-mig-1g10gb-19-0", "", podresources.ResultMIGNotFound)
}

// The qualified spelling of an attribute (gpu.nvidia.com/uuid) is read like the short one.
func TestQualifiedAttributeNames(t *testing.T) {
	i, _ := startInformer(t, []runtime.Object{gpuSlice("s", 1,
		device("gpu-0", attrs(podresources.GPUDriver+"/type", "gpu", podresources.GPUDriver+"/uuid", "GPU-abc")))})
	wantResolve(t, i, "node-1", "gpu-0", "GPU-abc", podresources.ResultGPU)
}

// While the driver republishes a pool, the slices of its newest generation alone count.
func TestNewestPoolGenerationWins(t *testing.T) {
	i, client := startInformer(t, []runtime.Object{
		gpuSlice("old", 1, device("gpu-0", attrs("type", "gpu", "uuid", "GPU-old")), device("gpu-1", attrs("type", "gpu", "uuid", "GPU-gone"))),
		gpuSlice("new", 2, device("gpu-0", attrs("type", "gpu", "uuid", "GPU-new"))),
	})
	wantResolve(t, i, "node-1", "gpu-0", "GPU-new", podresources.ResultGPU)
	wantResolve(t, i, "node-1", "gpu-1", "", podresources.ResultUnknownDevice)

	// The newer slice goes: the older generation is the newest again.
	if err := client.ResourceV1().ResourceSlices().Delete(context.Background(), "new", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the old generation", 5*time.Second, 5*time.Millisecond, func() bool {
		u, _ := i.Resolve("node-1", "gpu-0")
		return u == "GPU-old"
	})
}

func TestTrimKeepsOnlyWhatResolveReads(t *testing.T) {
	s := gpuSlice("s", 4, device("gpu-0", attrs("type", "gpu", "uuid", "GPU-1")))
	s.Spec.SharedCounters = nil
	s.Labels = map[string]string{"a": "b"}
	out, err := trimSlice(s)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*resourcev1.ResourceSlice)
	d := got.Spec.Devices[0]
	if len(d.Attributes) != 2 || d.Capacity != nil || got.Labels != nil || got.Spec.Pool.Generation != 4 || *got.Spec.NodeName != "node-1" {
		t.Errorf("trimmed slice %+v; want pool, generation, node and the uuid and type attributes only", got)
	}
	if _, err := trimSlice("not a slice"); err != nil {
		t.Error(err)
	}
}

func TestOnChangeFollowsTheCache(t *testing.T) {
	var changes atomic.Int64
	_, client := startInformer(t, nil, WithOnChange(func() { changes.Add(1) }))
	if _, err := client.ResourceV1().ResourceSlices().Create(context.Background(),
		gpuSlice("s", 1, device("gpu-0", attrs("type", "gpu", "uuid", "GPU-1"))), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "a change notified", 5*time.Second, 5*time.Millisecond, func() bool { return changes.Load() > 0 })
}

// A forbidden list (no RBAC for resourceslices) is counted by reason; Resolve answers
// unknown_device instead of blocking or failing.
func TestForbiddenListIsCounted(t *testing.T) {
	client := servedClient()
	client.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceslices"}, "",
			errors.New(`User "system:serviceaccount:monitoring:cupti" cannot list resource "resourceslices"`))
	})
	i, err := New(client, podresources.GPUDriver, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { i.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.WaitFor(t, "a forbidden list counted", 5*time.Second, 5*time.Millisecond, func() bool {
		return sample(t, i.Snapshot(), "cupti_resourceslices_watch_errors_total", "forbidden") > 0
	})
	wantResolve(t, i, "node-1", "gpu-0", "", podresources.ResultUnknownDevice)
	if v := sample(t, i.Snapshot(), "cupti_resourceslices_synced"); v != 0 {
		t.Errorf("synced = %v with every list forbidden; want 0", v)
	}
}

// A cluster that does not serve resource.k8s.io/v1 (before Kubernetes 1.34): counted as
// not_served and asked again later, without listing; once it does, the cache fills.
func TestNotServedWaitsForTheAPI(t *testing.T) {
	client := fake.NewClientset(gpuSlice("s", 1, device("gpu-0", attrs("type", "gpu", "uuid", "GPU-1"))))
	var lists atomic.Int64
	client.PrependReactor("list", "resourceslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	i, err := New(client, podresources.GPUDriver, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	i.recheck = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { i.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.WaitFor(t, "not_served counted twice", 5*time.Second, 5*time.Millisecond, func() bool {
		return sample(t, i.Snapshot(), "cupti_resourceslices_watch_errors_total", "not_served") >= 2
	})
	if n := lists.Load(); n != 0 {
		t.Errorf("%d lists of an API the server does not serve; want none", n)
	}
	client.Lock()
	client.Resources = servedClient().Resources
	client.Unlock()
	testutil.WaitFor(t, "the slice once the API is served", 5*time.Second, 5*time.Millisecond, func() bool {
		u, _ := i.Resolve("node-1", "gpu-0")
		return u == "GPU-1"
	})
}

func TestNewRefusesMissingParts(t *testing.T) {
	for _, tc := range []struct{ driver, node string }{{"", "n"}, {"d", ""}} {
		if _, err := New(fake.NewClientset(), tc.driver, tc.node); err == nil {
			t.Errorf("New(driver %q, node %q) succeeded", tc.driver, tc.node)
		}
	}
	if _, err := New(nil, "d", "n"); err == nil {
		t.Error("New without a client succeeded")
	}
}

// sample returns the value of one series of the snapshot, failing when absent.
func sample(t *testing.T, s *snapshot.Snapshot, name string, labels ...string) float64 {
	t.Helper()
	for _, f := range s.Families {
		if f.Desc.Name != name {
			continue
		}
	next:
		for _, smp := range f.Samples {
			if len(smp.LabelValues) != len(labels) {
				continue
			}
			for k := range labels {
				if smp.LabelValues[k] != labels[k] {
					continue next
				}
			}
			return smp.Value
		}
	}
	t.Fatalf("no series %s%v in snapshot", name, labels)
	return 0
}
