package resourceslices

import (
	"strconv"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/podresources"
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
	profile, start, ok := parseMIGName(name)
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

// parseMIGName reads the GPU instance profile ID and placement start out of the name
// NVIDIA's driver gives a MIG partition, gpu-<minor>-mig-<profile name>-<profile ID>-<placement
// start> (for example gpu-0-mig-1g10gb-19-0 or gpu-3-mig-1g10gb-me-20-6).
func parseMIGName(name string) (profileID, placementStart int, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return 0, 0, false
	}
	minor, rest, found := strings.Cut(rest, "-mig-")
	if !found || !digits(minor) {
		return 0, 0, false
	}
	// The profile name may hold dashes; the last two fields are the numbers.
	head, startText, found := cutLast(rest, "-")
	if !found {
		return 0, 0, false
	}
	profileName, profileText, found := cutLast(head, "-")
	if !found || profileName == "" || !digits(profileText) || !digits(startText) {
		return 0, 0, false
	}
	profileID, err1 := strconv.Atoi(profileText)
	placementStart, err2 := strconv.Atoi(startText)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return profileID, placementStart, true
}

func cutLast(s, sep string) (before, after string, found bool) {
	if k := strings.LastIndex(s, sep); k >= 0 {
		return s[:k], s[k+len(sep):], true
	}
	return s, "", false
}

// digits reports whether s is a short run of decimal digits (profile IDs and placements
// are small; the bound keeps Atoi from overflowing).
func digits(s string) bool {
	if s == "" || len(s) > 6 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
