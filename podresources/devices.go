package podresources

import (
	"sort"
	"strings"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Owner is a container that holds a device.
type Owner struct {
	Pod, Namespace, Container string
}

// deviceMap is an immutable map from device ID to the containers holding it, sorted.
type deviceMap map[string][]Owner

// buildDeviceMap keeps the devices of matching resources from a List response.
func buildDeviceMap(resp *podresourcesv1.ListPodResourcesResponse, c *config) deviceMap {
	m := deviceMap{}
	for _, pod := range resp.GetPodResources() {
		for _, ctr := range pod.GetContainers() {
			owner := Owner{Pod: pod.GetName(), Namespace: pod.GetNamespace(), Container: ctr.GetName()}
			for _, dev := range ctr.GetDevices() {
				if !c.matches(dev.GetResourceName()) {
					continue
				}
				for _, id := range dev.GetDeviceIds() {
					key := deviceKey(id)
					if key == "" || contains(m[key], owner) {
						continue
					}
					m[key] = append(m[key], owner)
				}
			}
		}
	}
	for _, owners := range m {
		sort.Slice(owners, func(i, j int) bool {
			a, b := owners[i], owners[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			if a.Pod != b.Pod {
				return a.Pod < b.Pod
			}
			return a.Container < b.Container
		})
	}
	return m
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

// counts returns how many devices have one holder and how many have several.
func (m deviceMap) counts() (exclusive, shared int) {
	for _, owners := range m {
		if len(owners) == 1 {
			exclusive++
		} else {
			shared++
		}
	}
	return exclusive, shared
}
