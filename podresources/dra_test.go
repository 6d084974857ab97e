package podresources

import (
	"context"
	"sync"
	"testing"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// allocated is one device of a claim's allocation, as the kubelet's DRA manager keeps it.
type allocated struct {
	driver, pool, device string
	cdi                  []string
}

// claim is a ResourceClaim a container references, with its allocated devices.
type claim struct {
	name, namespace string
	devices         []allocated
}

// draCtr is a container holding claims, answered the way the kubelet's
// containerManagerImpl.GetDynamicResources builds it (Kubernetes 1.34-1.37): one
// DynamicResource per claim, one ClaimResource per allocated device, and the CDI device
// list of a driver accumulated over its devices (the kubelet appends to one slice per
// driver, so a later device of the same driver also lists the earlier devices' CDI IDs).
func draCtr(name string, claims ...claim) *podresourcesv1.ContainerResources {
	c := &podresourcesv1.ContainerResources{Name: name}
	for _, cl := range claims {
		dr := &podresourcesv1.DynamicResource{ClaimName: cl.name, ClaimNamespace: cl.namespace}
		cdi := map[string][]*podresourcesv1.CDIDevice{}
		for _, d := range cl.devices {
			for _, id := range d.cdi {
				cdi[d.driver] = append(cdi[d.driver], &podresourcesv1.CDIDevice{Name: id})
			}
			dr.ClaimResources = append(dr.ClaimResources, &podresourcesv1.ClaimResource{
				CdiDevices: cdi[d.driver], DriverName: d.driver, PoolName: d.pool, DeviceName: d.device})
		}
		c.DynamicResources = append(c.DynamicResources, dr)
	}
	return c
}

// gpuDev is a device of NVIDIA's driver in pool node-1, with the CDI name the driver
// gives it (k8s.gpu.nvidia.com/claim=<claim UID>-<device>).
func gpuDev(device string) allocated {
	return allocated{driver: GPUDriver, pool: "node-1", device: device, cdi: []string{"k8s.gpu.nvidia.com/claim=0b3f-" + device}}
}

// sliceTable is a DeviceResolver over a fixed table of pool/device -> uuid, result, safe to
// change while a client reads it.
type sliceTable struct {
	mu    sync.Mutex
	table map[string][2]string
	calls int
}

func (s *sliceTable) set(pool, device, uuid, result string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.table == nil {
		s.table = map[string][2]string{}
	}
	s.table[pool+"/"+device] = [2]string{uuid, result}
}

func (s *sliceTable) resolve(pool, device string) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	r, ok := s.table[pool+"/"+device]
	if !ok {
		return "", ResultUnknownDevice
	}
	return r[0], r[1]
}

func refresh(t *testing.T, c *Client) {
	t.Helper()
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

func TestDRADevicesMapToTheirGPUAndMIGUUIDs(t *testing.T) {
	var rs sliceTable
	rs.set("node-1", "gpu-0", "GPU-aaaa", ResultGPU)
	rs.set("node-1", "gpu-1-mig-1g10gb-19-0", "MIG-bbbb", ResultMIG)
	rs.set("node-1", "gpu-2-mig-1g10gb-19-1", "", ResultMIGNotFound)
	k := &fakeKubelet{}
	k.set(0,
		pod("ml", "trainer-0", draCtr("main", claim{name: "trainer-0-gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-0")}})),
		pod("ml", "mig-user", draCtr("worker", claim{name: "mig", namespace: "ml", devices: []allocated{
			gpuDev("gpu-1-mig-1g10gb-19-0"),
			{driver: "nic.example.com", pool: "node-1", device: "eth1"}, // another driver: not a GPU
		}})),
		pod("ml", "waiting", draCtr("main", claim{name: "later", namespace: "ml", devices: []allocated{gpuDev("gpu-2-mig-1g10gb-19-1"), gpuDev("gpu-9")}})),
	)
	c := newClient(t, startKubelet(t, k), WithDRA(rs.resolve))
	refresh(t, c)

	wantOwner(t, c, "GPU-aaaa", "trainer-0", "ml", "main")
	wantOwner(t, c, "mig-bbbb", "mig-user", "ml", "worker")
	if got := c.Owners("GPU-aaaa"); len(got) != 1 || got[0].Claim != "trainer-0-gpu" {
		t.Errorf("Owners(GPU-aaaa) = %+v; want the claim trainer-0-gpu", got)
	}
	s := c.Snapshot()
	for result, want := range map[string]float64{ResultGPU: 1, ResultMIG: 1, ResultMIGNotFound: 1, ResultUnknownDevice: 1, ResultNoUUID: 0, resultNoSlices: 0} {
		if v := metric(t, s, "cupti_podresources_dra_devices", result); v != want {
			t.Errorf("dra_devices{result=%s} = %v; want %v", result, v, want)
		}
	}
	if v := metric(t, s, "cupti_podresources_claim_info", "GPU-aaaa", "trainer-0-gpu", "gpu-0", "ml", "trainer-0", "main"); v != 1 {
		t.Errorf("claim_info of GPU-aaaa = %v; want 1", v)
	}
	if v := metric(t, s, "cupti_podresources_claim_info", "MIG-bbbb", "mig", "gpu-1-mig-1g10gb-19-0", "ml", "mig-user", "worker"); v != 1 {
		t.Errorf("claim_info of MIG-bbbb = %v; want 1", v)
	}
	if got := len(c.Claims()); got != 2 {
		t.Errorf("%d claim devices; want 2 (unmapped devices are counted, not listed): %+v", got, c.Claims())
	}
	if v := metric(t, s, "cupti_podresources_devices", "exclusive"); v != 2 {
		t.Errorf("exclusive devices = %v; want 2", v)
	}
}

// One ResourceClaim referenced by two pods (the way DRA shares a GPU between pods): the
// GPU is shared, credited to neither; the claim info names both holders.
func TestDRAClaimSharedByTwoPodsIsShared(t *testing.T) {
	var rs sliceTable
	rs.set("node-1", "gpu-0", "GPU-aaaa", ResultGPU)
	shared := claim{name: "shared-gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-0")}}
	k := &fakeKubelet{}
	k.set(0, pod("ml", "a", draCtr("c", shared)), pod("ml", "b", draCtr("c", shared)))
	c := newClient(t, startKubelet(t, k), WithDRA(rs.resolve))
	refresh(t, c)

	wantNoOwner(t, c, "GPU-aaaa")
	if got := c.Owners("GPU-aaaa"); len(got) != 2 || got[0].Pod != "a" || got[1].Pod != "b" {
		t.Errorf("Owners = %+v; want pods a and b", got)
	}
	s := c.Snapshot()
	if v := metric(t, s, "cupti_podresources_devices", "shared"); v != 1 {
		t.Errorf("shared devices = %v; want 1", v)
	}
	if v := metric(t, s, "cupti_podresources_dra_devices", ResultGPU); v != 1 {
		t.Errorf("dra_devices{gpu} = %v; want 1 (one device, however many pods hold it)", v)
	}
	for _, p := range []string{"a", "b"} {
		if v := metric(t, s, "cupti_podresources_claim_info", "GPU-aaaa", "shared-gpu", "gpu-0", "ml", p, "c"); v != 1 {
			t.Errorf("claim_info of pod %s = %v; want 1", p, v)
		}
	}
}

// Two containers of one pod referencing one claim: the pod holds the GPU, no container
// does alone.
func TestDRAClaimOfTwoContainersNamesThePod(t *testing.T) {
	var rs sliceTable
	rs.set("node-1", "gpu-0", "GPU-aaaa", ResultGPU)
	cl := claim{name: "gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-0")}}
	k := &fakeKubelet{}
	k.set(0, pod("ml", "trainer", draCtr("main", cl), draCtr("profiler", cl)))
	c := newClient(t, startKubelet(t, k), WithDRA(rs.resolve))
	refresh(t, c)
	wantOwner(t, c, "GPU-aaaa", "trainer", "ml", "")
	if v := metric(t, c.Snapshot(), "cupti_podresources_devices", "exclusive"); v != 1 {
		t.Errorf("exclusive devices = %v; want 1", v)
	}
}

// A node where the device plugin and DRA both give GPUs: each GPU goes to its own pod.
func TestDevicePluginAndDRAOnOneNode(t *testing.T) {
	var rs sliceTable
	rs.set("node-1", "gpu-1", "GPU-bbbb", ResultGPU)
	k := &fakeKubelet{}
	k.set(0,
		pod("ml", "plugin-pod", ctr("main", "nvidia.com/gpu", "GPU-aaaa")),
		pod("ml", "dra-pod", draCtr("main", claim{name: "gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-1")}})),
	)
	c := newClient(t, startKubelet(t, k), WithDRA(rs.resolve))
	refresh(t, c)
	wantOwner(t, c, "GPU-aaaa", "plugin-pod", "ml", "main")
	wantOwner(t, c, "GPU-bbbb", "dra-pod", "ml", "main")
	if got := c.Owners("GPU-aaaa"); len(got) != 1 || got[0].Claim != "" {
		t.Errorf("device plugin owner %+v; want no claim", got)
	}
	wantNoOwner(t, c, "GPU-cccc") // a GPU no one holds
}

func TestDRAWithoutResolverIsCountedNotAttributed(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0, pod("ml", "p", draCtr("c", claim{name: "gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-0"), gpuDev("gpu-1")}})))
	c := newClient(t, startKubelet(t, k))
	refresh(t, c)
	if v := metric(t, c.Snapshot(), "cupti_podresources_dra_devices", resultNoSlices); v != 2 {
		t.Errorf("dra_devices{no_resource_slices} = %v; want 2", v)
	}
	if got := c.Claims(); len(got) != 0 {
		t.Errorf("claims %+v without a resolver; want none", got)
	}
}

// A ResourceSlice that arrives after the kubelet's answer (the informer syncs after the
// first refresh): Rebuild maps the device without asking the kubelet again.
func TestRebuildMapsWhatTheResolverLearnedLater(t *testing.T) {
	var rs sliceTable
	k := &fakeKubelet{}
	k.set(0, pod("ml", "p", draCtr("c", claim{name: "gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-0")}})))
	c := newClient(t, startKubelet(t, k), WithDRA(rs.resolve))
	c.Rebuild() // before any answer: nothing to do, no panic
	refresh(t, c)
	wantNoOwner(t, c, "GPU-aaaa")
	if v := metric(t, c.Snapshot(), "cupti_podresources_dra_devices", ResultUnknownDevice); v != 1 {
		t.Errorf("dra_devices{unknown_device} = %v; want 1", v)
	}
	k.mu.Lock()
	calls := k.calls
	k.mu.Unlock()

	rs.set("node-1", "gpu-0", "GPU-aaaa", ResultGPU)
	c.Rebuild()
	wantOwner(t, c, "GPU-aaaa", "p", "ml", "c")
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.calls != calls {
		t.Errorf("Rebuild called the kubelet (%d calls, %d before)", k.calls, calls)
	}
}

// A resolver answering outside its contract does not add label values or owners.
func TestDRAResolverAnswersAreChecked(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0, pod("ml", "p", draCtr("c", claim{name: "gpu", namespace: "ml", devices: []allocated{gpuDev("gpu-0"), gpuDev("gpu-1")}})))
	c := newClient(t, startKubelet(t, k), WithDRA(func(_, device string) (string, string) {
		if device == "gpu-0" {
			return "", ResultGPU // success without a UUID
		}
		return "GPU-bbbb", "made_up" // a UUID with an unknown result
	}))
	refresh(t, c)
	wantNoOwner(t, c, "GPU-bbbb")
	s := c.Snapshot()
	if v := metric(t, s, "cupti_podresources_dra_devices", ResultNoUUID); v != 1 {
		t.Errorf("dra_devices{no_uuid} = %v; want 1", v)
	}
	if v := metric(t, s, "cupti_podresources_dra_devices", ResultUnknownDevice); v != 1 {
		t.Errorf("dra_devices{unknown_device} = %v; want 1", v)
	}
	for _, f := range s.Families {
		if f.Desc.Name == "cupti_podresources_dra_devices" && len(f.Samples) != len(draResults) {
			t.Errorf("%d result series; want %d", len(f.Samples), len(draResults))
		}
	}
}
