package podresources

import "slices"

// GPUDriver is the DRA driver of NVIDIA GPUs (NVIDIA's k8s-dra-driver-gpu): the devices it
// allocates are GPUs and MIG devices. Devices of other drivers are not read.
const GPUDriver = "gpu.nvidia.com"

// DeviceResolver maps a device the GPU driver allocated, named by its pool and device name
// as the kubelet reports it, to the UUID of the GPU or MIG device it is (from the driver's
// ResourceSlices). result is ResultGPU or ResultMIG with the UUID, or the reason it is not
// known (ResultUnknownDevice, ResultMIGNotFound, ResultNoUUID) with an empty UUID. It must
// answer from memory: it runs for every DRA device of every refresh.
type DeviceResolver func(pool, device string) (uuid, result string)

// Results of DeviceResolver, counted in cupti_podresources_dra_devices{result}.
const (
	ResultGPU           = "gpu"            // a whole GPU: its UUID
	ResultMIG           = "mig"            // a MIG device: its MIG UUID
	ResultUnknownDevice = "unknown_device" // no ResourceSlice of this node lists it (not synced yet, watch forbidden or failing, slice gone)
	ResultMIGNotFound   = "mig_not_found"  // a MIG device the driver creates on demand that NVML does not list (yet)
	ResultNoUUID        = "no_uuid"        // listed without a uuid attribute, and not a MIG device the exporter can find
	resultNoSlices      = "no_resource_slices"
)

// draResults are the result codes, in the order the self-metric lists them.
var draResults = []string{ResultGPU, ResultMIG, ResultUnknownDevice, ResultMIGNotFound, ResultNoUUID, resultNoSlices}

// draDevice names a device of the GPU driver in the kubelet's answer.
type draDevice struct{ pool, device string }

type draResolution struct{ uuid, result string }

// resolveDRA maps d with resolve; without a resolver the device is counted as such.
func resolveDRA(resolve DeviceResolver, d draDevice) draResolution {
	if resolve == nil {
		return draResolution{result: resultNoSlices}
	}
	uuid, result := resolve(d.pool, d.device)
	if !slices.Contains(draResults, result) {
		result = ResultUnknownDevice // keep the label's values to the documented ones
	}
	if uuid == "" && (result == ResultGPU || result == ResultMIG) {
		result = ResultNoUUID // a resolver that claims success without a UUID
	}
	if uuid != "" && result != ResultGPU && result != ResultMIG {
		uuid = ""
	}
	return draResolution{uuid: uuid, result: result}
}
