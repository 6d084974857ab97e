package podresources

import (
	"sort"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var (
	upDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_up", Kind: snapshot.KindGauge,
		Help:     "Whether the last call to the kubelet PodResources API succeeded (1) or not (0).",
		OTelName: "cupti.podresources.up", OTelUnit: "1",
	})
	errorsDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_errors_total", Kind: snapshot.KindCounter,
		Help:     "Failed calls to the kubelet PodResources API, by reason (socket_missing, permission_denied, unavailable, timeout, rpc_error).",
		OTelName: "cupti.podresources.errors", OTelUnit: "{error}",
		LabelNames: []string{"reason"},
	})
	lastRefreshDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_last_refresh_timestamp_seconds", Kind: snapshot.KindGauge, Unit: "seconds",
		Help:     "Unix time of the last successful refresh of the GPU-to-pod map; 0 before the first.",
		OTelName: "cupti.podresources.last_refresh", OTelUnit: "s",
	})
	durationDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_refresh_duration_seconds", Kind: snapshot.KindGauge, Unit: "seconds",
		Help:     "How long the last call to the kubelet PodResources API took.",
		OTelName: "cupti.podresources.refresh.duration", OTelUnit: "s",
	})
	devicesDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_devices", Kind: snapshot.KindGauge,
		Help:     "GPU and MIG devices assigned to containers in the current map (device plugin and DRA), by sharing (exclusive: one pod holds it; shared: several pods, not attributed).",
		OTelName: "cupti.podresources.devices", OTelUnit: "{device}",
		LabelNames: []string{"sharing"},
	})
	draDevicesDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_dra_devices", Kind: snapshot.KindGauge,
		Help: "Devices of NVIDIA's DRA driver (gpu.nvidia.com) allocated to containers in the last kubelet answer, by how they mapped to a UUID: " +
			"gpu, mig; or why not (not attributed): unknown_device (no ResourceSlice of this node lists it), mig_not_found (a MIG device created on demand that NVML does not list), " +
			"no_uuid (listed without a uuid), no_resource_slices (the ResourceSlice informer is off).",
		OTelName: "cupti.podresources.dra.devices", OTelUnit: "{device}",
		LabelNames: []string{"result"},
	})
	claimInfoDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_podresources_claim_info", Kind: snapshot.KindGauge,
		Help: "A GPU or MIG device (uuid) that a DRA ResourceClaim gave to a container, with the claim and the driver's device name; value 1. " +
			"One series per container holding it: several pods on one uuid share the device, and its device series carry no pod.",
		OTelName: "cupti.podresources.claim.info", OTelUnit: "1",
		LabelNames: []string{"uuid", "claim", "device", "namespace", "pod", "container"},
	})
)

// descs are the families Snapshot emits.
var descs = snapshot.NewTable()

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
