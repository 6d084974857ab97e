package podresources

import (
	"sort"
	"strings"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Owner is a container that holds a device.
type Owner struct {
	Pod, Namespace, Container string
	// Claim is the ResourceClaim through which DRA gave the device; empty for the device
	// plugin.
	Claim string
}

// ClaimDevice is a GPU or MIG device that a DRA ResourceClaim gave to a container.
type ClaimDevice struct {
	UUID   string // as the ResourceSlice (or NVML, for a MIG device created on demand) names it
	Device string // the driver's device name in its ResourceSlice ("gpu-0", "gpu-0-mig-1g10gb-19-0")
	Owner  Owner
}

// deviceMap is what one kubelet answer says, immutable once built.
type deviceMap struct {
	owners map[string][]Owner // device key (deviceKey) -> its holders, sorted
	claims []ClaimDevice      // DRA allocations mapped to a UUID, sorted by UUID and owner
	dra    map[string]int     // distinct DRA devices of the GPU driver, by result
	// unresolved are the DRA devices of the GPU driver not mapped to a UUID, with why.
	unresolved map[draDevice]string
}

// buildDeviceMap keeps the devices of matching resources and of the GPU DRA driver from a
// List response; resolve maps a DRA device to its UUID (nil: no ResourceSlice informer).
func buildDeviceMap(resp *podresourcesv1.ListPodResourcesResponse, c *config, resolve DeviceResolver) deviceMap {
	m := deviceMap{owners: map[string][]Owner{}, dra: map[string]int{}, unresolved: map[draDevice]string{}}
	for _, r := range draResults {
		m.dra[r] = 0
	}
	add := func(key string, o Owner) {
		if key != "" && !contains(m.owners[key], o) {
			m.owners[key] = append(m.owners[key], o)
		}
	}
	resolved := map[draDevice]draResolution{} // each distinct device once, however many hold it
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			owner := Owner{Pod: pod.GetName(), Namespace: pod.GetNamespace(), Container: ctr.GetName()}
			for _, dev := range ctr.GetDevices() {
				if !c.matches(dev.GetResourceName()) {
					continue
				}
				for _, id := range dev.GetDeviceIds() {
					add(deviceKey(id), owner)
				}
			}
			for _, dr := range ctr.GetDynamicResources() {
				o := owner
				o.Claim = dr.GetClaimName()
				for _, cr := range dr.GetClaimResources() {
					if cr.GetDriverName() != GPUDriver || cr.GetDeviceName() == "" {
						continue // another driver's device (a NIC, ...), or not a device
					}
					d := draDevice{pool: cr.GetPoolName(), device: cr.GetDeviceName()}
					res, seen := resolved[d]
					if !seen {
						res = resolveDRA(resolve, d)
						resolved[d] = res
						m.dra[res.result]++
					}
					if res.uuid == "" {
						m.unresolved[d] = res.result
						continue
					}
					key := deviceKey(res.uuid)
					if !contains(m.owners[key], o) {
						m.claims = append(m.claims, ClaimDevice{UUID: res.uuid, Device: d.device, Owner: o})
					}
					add(key, o)
				}
			}
		}
	}
	for _, owners := range m.owners {
		sort.Slice(owners, func(i, j int) bool { return ownerLess(owners[i], owners[j]) })
	}
	sort.Slice(m.claims, func(i, j int) bool {
		a, b := m.claims[i], m.claims[j]
		if a.UUID != b.UUID {
			return a.UUID < b.UUID
		}
		return ownerLess(a.Owner, b.Owner)
	})
	return m
}

func ownerLess(a, b Owner) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	if a.Pod != b.Pod {
		return a.Pod < b.Pod
	}
	if a.Container != b.Container {
		return a.Container < b.Container
	}
	return a.Claim < b.Claim
}

// deviceKey normalises a device ID: the replica suffix of time-sliced GPUs
// ("GPU-abc::3") is cut and the ID is lower-cased, as the exporter's uuid label is.
func deviceKey(id string) string {
	id, _, _ = strings.Cut(id, "::")
	return strings.ToLower(strings.TrimSpace(id))
}

func contains(owners []Owner, o Owner) bool {
	for _, x := range owners {
		if x == o {
			return true
		}
	}
	return false
}

// holder is the one pod (and container, when it is one) that holds a device: all owners
// in one pod name the pod, all in one container the container too. ok is false when no
// one or several pods hold it (a shared GPU is never credited to one of its pods).
func holder(owners []Owner) (pod, namespace, container string, ok bool) {
	if len(owners) == 0 {
		return "", "", "", false
	}
	first := owners[0]
	container = first.Container
	for _, o := range owners[1:] {
		if o.Pod != first.Pod || o.Namespace != first.Namespace {
			return "", "", "", false
		}
		if o.Container != container {
			container = "" // several containers of one pod: the pod holds it
		}
	}
	return first.Pod, first.Namespace, container, true
}

// counts returns how many devices one pod holds and how many several pods share.
func (m deviceMap) counts() (exclusive, shared int) {
	for _, owners := range m.owners {
		if _, _, _, ok := holder(owners); ok {
			exclusive++
		} else {
			shared++
		}
	}
	return exclusive, shared
}
