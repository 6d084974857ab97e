package podresources

import (
	"sort"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// descs are the families Snapshot emits.
var descs = snapshot.NewTable()

var (
	upDesc          = descs.Gauge("cupti_podresources_up", "", "cupti.podresources.up", "1", "Whether the last call to the kubelet PodResources API succeeded (1) or not (0).")
	errorsDesc      = descs.Counter("cupti_podresources_errors_total", "", "cupti.podresources.errors", "{error}", "Failed calls to the kubelet PodResources API, by reason (socket_missing, permission_denied, unavailable, timeout, rpc_error).", "reason")
	lastRefreshDesc = descs.Gauge("cupti_podresources_last_refresh_timestamp_seconds", "seconds", "cupti.podresources.last_refresh", "s", "Unix time of the last successful refresh of the GPU-to-pod map; 0 before the first.")
	durationDesc    = descs.Gauge("cupti_podresources_refresh_duration_seconds", "seconds", "cupti.podresources.refresh.duration", "s", "How long the last call to the kubelet PodResources API took.")
	devicesDesc     = descs.Gauge("cupti_podresources_devices", "", "cupti.podresources.devices", "{device}", "GPU and MIG devices assigned to containers in the current map (device plugin and DRA), by sharing (exclusive: one pod holds it; shared: several pods, not attributed).", "sharing")
	draDevicesDesc  = descs.Gauge("cupti_podresources_dra_devices", "", "cupti.podresources.dra.devices", "{device}", "Devices of NVIDIA's DRA driver (gpu.nvidia.com) allocated to containers in the last kubelet answer, by how they mapped to a UUID: "+
		"gpu, mig; or why not (not attributed): unknown_device (no ResourceSlice of this node lists it), mig_not_found (a MIG device created on demand that NVML does not list), "+
		"no_uuid (listed without a uuid), no_resource_slices (the ResourceSlice informer is off).", "result")
	claimInfoDesc = descs.Gauge("cupti_podresources_claim_info", "", "cupti.podresources.claim.info", "1", "A GPU or MIG device (uuid) that a DRA ResourceClaim gave to a container, with the claim and the driver's device name; value 1. "+
		"One series per container holding it: several pods on one uuid share the device, and its device series carry no pod.", "uuid", "claim", "device", "namespace", "pod", "container")
)

// Descs lists the families Snapshot emits.
func Descs() []*snapshot.Desc { return descs.Descs() }

// Snapshot returns the client's self-metrics. It never blocks on the kubelet.
func (c *Client) Snapshot() *snapshot.Snapshot {
	var exclusive, shared int
	dra := make([]snapshot.Sample, len(draResults))
	for i, r := range draResults {
		dra[i] = snapshot.Sample{LabelValues: []string{r}}
	}
	var claims []snapshot.Sample
	if m := c.devices.Load(); m != nil {
		exclusive, shared = m.counts()
		for i, r := range draResults {
			dra[i].Value = float64(m.dra[r])
		}
		claims = make([]snapshot.Sample, len(m.claims))
		for i, d := range m.claims {
			o := d.Owner
			claims[i] = snapshot.Sample{LabelValues: []string{d.UUID, o.Claim, d.Device, o.Namespace, o.Pod, o.Container}, Value: 1}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	up := 0.0
	if c.up {
		up = 1
	}
	last := 0.0
	if !c.lastGood.IsZero() {
		last = float64(c.lastGood.UnixNano()) / 1e9
	}
	reasons := make([]string, 0, len(c.errors))
	for r := range c.errors {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	errs := make([]snapshot.Sample, 0, len(reasons))
	for _, r := range reasons {
		errs = append(errs, snapshot.Sample{LabelValues: []string{r}, Value: float64(c.errors[r]), Start: c.start})
	}
	return &snapshot.Snapshot{
		Time: c.cfg.now(),
		Families: []snapshot.Family{
			{Desc: upDesc, Samples: []snapshot.Sample{{Value: up}}},
			{Desc: errorsDesc, Samples: errs},
			{Desc: lastRefreshDesc, Samples: []snapshot.Sample{{Value: last}}},
			{Desc: durationDesc, Samples: []snapshot.Sample{{Value: c.lastElapsed.Seconds()}}},
			{Desc: devicesDesc, Samples: []snapshot.Sample{
				{LabelValues: []string{"exclusive"}, Value: float64(exclusive)},
				{LabelValues: []string{"shared"}, Value: float64(shared)},
			}},
			{Desc: draDevicesDesc, Samples: dra},
			{Desc: claimInfoDesc, Samples: claims},
		},
	}
}
