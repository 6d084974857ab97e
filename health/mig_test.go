package health

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// migDevices extends go-nvml's mock GPU with what its server leaves out: the MIG devices
// that the GPU and compute instances created on it make. As on a real GPU, each compute
// instance is one MIG device, listed by GetMigDeviceHandleByIndex (empty slots answer
// NOT_FOUND), with a UUID of its own that a re-created instance does not reuse; and
// GetGpuInstanceById finds a GPU instance by its ID. getByID, when set, replaces the
// latter's answer (NO_PERMISSION for an unprivileged user).
type migDevices struct {
	mu      sync.Mutex
	d       *server.Device
	uuids   map[*server.ComputeInstance]string
	next    int
	getByID nvml.Return
}

func newMIGDevices(d *server.Device) *migDevices {
	m := &migDevices{d: d, uuids: map[*server.ComputeInstance]string{}}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		list := m.list()
		if i < 0 || i >= 7 {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		// Slot k holds the k-th MIG device; the odd slots are left empty, as the driver
		// leaves the slots of destroyed instances.
		if i%2 == 1 || i/2 >= len(list) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return list[i/2], nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		m.mu.Lock()
		ret := m.getByID
		m.mu.Unlock()
		if ret != nvml.SUCCESS {
			return nil, ret
		}
		d.RLock()
		defer d.RUnlock()
		for gi := range d.GpuInstances {
			if int(gi.Info.Id) == id {
				return gi, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return m
}

// list returns the MIG devices of the GPU's compute instances, by GPU and compute instance ID.
func (m *migDevices) list() []nvml.Device {
	m.d.RLock()
	var cis []*server.ComputeInstance
	for gi := range m.d.GpuInstances {
		gi.RLock()
		for ci := range gi.ComputeInstances {
			cis = append(cis, ci)
		}
		gi.RUnlock()
	}
	m.d.RUnlock()
	slices.SortFunc(cis, func(a, b *server.ComputeInstance) int {
		ga, gb := a.Info.GpuInstance.(*server.GpuInstance).Info.Id, b.Info.GpuInstance.(*server.GpuInstance).Info.Id
		if ga != gb {
			return int(ga) - int(gb)
		}
		return int(a.Info.Id) - int(b.Info.Id)
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]nvml.Device, len(cis))
	for k, ci := range cis {
		uuid, ok := m.uuids[ci]
		if !ok {
			uuid = fmt.Sprintf("MIG-%08x-1111-5222-8333-%012x", m.next, m.next)
			m.next++
			m.uuids[ci] = uuid
		}
		gi := ci.Info.GpuInstance.(*server.GpuInstance)
		profile := m.d.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]
		out[k] = &mock.Device{
			GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return int(gi.Info.Id), nvml.SUCCESS },
			GetComputeInstanceIdFunc: func() (int, nvml.Return) { return int(ci.Info.Id), nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				return nvml.Memory{Total: profile.MemorySizeMB << 20, Used: 1 << 20}, nvml.SUCCESS
			},
			GetNameFunc: func() (string, nvml.Return) { return m.d.Config.Name + " MIG 1g.10gb", nvml.SUCCESS },
		}
	}
	return out
}

// createMIG makes a MIG device the way NVIDIA's DRA driver does when it prepares a claim
// for a partition: a GPU instance of the profile at the placement, then a compute instance
// taking all of it. It returns the GPU instance.
func createMIG(t *testing.T, d *server.Device, profile int, start uint32) nvml.GpuInstance {
	t.Helper()
	info, ret := d.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		t.Fatalf("GPU instance profile %d: %v", profile, nvml.ErrorString(ret))
	}
	placements, _ := d.GetGpuInstancePossiblePlacements(&info)
	var placement *nvml.GpuInstancePlacement
	for k := range placements {
		if placements[k].Start == start {
			placement = &placements[k]
		}
	}
	if placement == nil {
		t.Fatalf("profile %d has no placement starting at %d: %+v", profile, start, placements)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, placement)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	if _, ret := gi.CreateComputeInstance(&ciInfo); ret != nvml.SUCCESS {
		t.Fatal(nvml.ErrorString(ret))
	}
	return gi
}

// MIG devices created on demand are found by the GPU, GPU instance profile and placement
// that NVIDIA's DRA driver names them by.
func TestMIGDeviceUUIDByPlacement(t *testing.T) {
	srv, _ := newFakeServer(t)
	d := srv.Devices[0].(*server.Device)
	if ret, _ := d.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS { // the mock's own MIG mode; the other GPUs keep it off
		t.Fatal(ret)
	}
	newMIGDevices(d)
	profile := nvml.GPU_INSTANCE_PROFILE_1_SLICE
	info, _ := d.GetGpuInstanceProfileInfo(profile)
	pid := int(info.Id)
	createMIG(t, d, profile, 0)
	second := createMIG(t, d, profile, 2)

	src := New(srv, nil, WithoutEvents())
	started(t, src)
	if _, ok := src.MIGDeviceUUID(d.UUID, pid, 0); ok {
		t.Fatal("a MIG device found before the first collection")
	}
	src.Collect()
	first, ok0 := src.MIGDeviceUUID(d.UUID, pid, 0)
	atTwo, ok2 := src.MIGDeviceUUID(d.UUID, pid, 2)
	if !ok0 || !ok2 || first == atTwo || first[:4] != "MIG-" || atTwo[:4] != "MIG-" {
		t.Fatalf("MIG devices at placements 0 and 2: %q %v, %q %v; want two MIG UUIDs", first, ok0, atTwo, ok2)
	}
	if got, ok := src.MIGDeviceUUID(d.UUID, pid, 4); ok {
		t.Errorf("placement 4 (no instance) found %q", got)
	}
	if _, ok := src.MIGDeviceUUID(srv.Devices[1].(*server.Device).UUID, pid, 0); ok {
		t.Error("a MIG device found on GPU 1, which has MIG off")
	}
	if v, _ := series(t, src.Snapshot(), "cupti_gpu_mig_memory_total_bytes", map[string]string{"gpu": "0"}); v != 10240<<20 {
		t.Errorf("MIG memory total = %v; want the 1g.10gb profile's 10 GiB", v)
	}

	// The claim ends, the driver destroys the instance and a new claim gets the same
	// placement: a new MIG device, a new UUID.
	if ret := second.Destroy(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	src.Collect()
	if got, ok := src.MIGDeviceUUID(d.UUID, pid, 2); ok {
		t.Errorf("destroyed MIG device still found: %q", got)
	}
	createMIG(t, d, profile, 2)
	src.Collect()
	again, ok := src.MIGDeviceUUID(d.UUID, pid, 2)
	if !ok || again == atTwo || again == first {
		t.Errorf("re-created MIG device at placement 2: %q %v; want a new UUID (was %q)", again, ok, atTwo)
	}
	if got, _ := src.MIGDeviceUUID(d.UUID, pid, 0); got != first {
		t.Errorf("MIG device at placement 0 changed to %q; want %q", got, first)
	}
}

// Without the privilege NVML asks for GetGpuInstanceById, MIG devices cannot be placed:
// counted as NVML errors, their memory series kept.
func TestMIGPlacementWithoutPermission(t *testing.T) {
	srv, _ := newFakeServer(t)
	d := srv.Devices[0].(*server.Device)
	d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	migs := newMIGDevices(d)
	migs.getByID = nvml.ERROR_NO_PERMISSION
	createMIG(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0)
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	src.Collect()
	info, _ := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	if got, ok := src.MIGDeviceUUID(d.UUID, int(info.Id), 0); ok {
		t.Errorf("MIG device placed without permission: %q", got)
	}
	snap := src.Snapshot()
	if v, ok := series(t, snap, "cupti_health_read_errors_total", map[string]string{"gpu": "0", "field": "mig_placement"}); !ok || v != 1 {
		t.Errorf("mig_placement errors = %v, %v; want 1", v, ok)
	}
	if _, ok := series(t, snap, "cupti_gpu_mig_memory_used_bytes", map[string]string{"gpu": "0"}); !ok {
		t.Error("MIG memory series lost with the placement")
	}
}
