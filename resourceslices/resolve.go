package resourceslices

import (
	"strings"

	"github.com/cupti-exporter/cupti-exporter/podresources"
	"github.com/cupti-exporter/cupti-exporter/resourceslices/migname"
)

// Attributes NVIDIA's GPU driver (k8s-dra-driver-gpu) publishes on each device of its
// slices: type "gpu" (a whole GPU, uuid GPU-...), "mig" (uuid MIG-... for a MIG device that
// exists; none for one the driver creates when a claim is prepared, with parentUUID), or
// "vfio".
const (
	attrUUID       = "uuid"
	attrType       = "type"
	attrParentUUID = "parentUUID"
	typeMIG        = "mig"
)

// Resolve maps a device the driver allocated (its pool and device name, as the kubelet's
// PodResources API reports them) to the UUID of the GPU or MIG device it is, with
// podresources.ResultGPU or ResultMIG; or answers why not with an empty UUID
// (ResultUnknownDevice, ResultMIGNotFound, ResultNoUUID). It reads the cache only; it is a
// podresources.DeviceResolver.
func (i *Informer) Resolve(pool, name string) (uuid, result string) {
	d, ok := i.device(pool, name)
	if !ok {
		return "", podresources.ResultUnknownDevice
	}
	typ := stringAttr(d, attrType)
	if uuid := stringAttr(d, attrUUID); uuid != "" {
		if typ == typeMIG || strings.HasPrefix(uuid, "MIG-") {
			return uuid, podresources.ResultMIG
		}
		return uuid, podresources.ResultGPU
	}
	parent := stringAttr(d, attrParentUUID)
	if typ != typeMIG || parent == "" {
		return "", podresources.ResultNoUUID
	}
	// A MIG device created on demand ("dynamic MIG"): the slice lists the partition before
	// it exists, named after its GPU instance profile and placement; NVML names the MIG
	// device once the driver created it for the claim.
	profile, start, ok := migname.Parse(name)
	if !ok {
		return "", podresources.ResultNoUUID
	}
	if i.mig == nil {
		return "", podresources.ResultMIGNotFound
	}
	if uuid, ok := i.mig(parent, profile, start); ok && uuid != "" {
		return uuid, podresources.ResultMIG
	}
	return "", podresources.ResultMIGNotFound
}
