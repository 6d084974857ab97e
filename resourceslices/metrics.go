package resourceslices

import (
	"time"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// descs are the families Snapshot emits.
var descs = snapshot.NewTable()

var (
	syncedDesc      = descs.Gauge("cupti_resourceslices_synced", "", "cupti.resourceslices.synced", "1", "Whether the cache of this node's ResourceSlices of NVIDIA's DRA driver has been filled from the API server (1) or not yet (0).")
	devicesDesc     = descs.Gauge("cupti_resourceslices_devices", "", "cupti.resourceslices.devices", "{device}", "Devices the cached ResourceSlices of NVIDIA's DRA driver list for this node, by type (gpu, mig, other), all generations counted.", "type")
	watchErrorsDesc = descs.Counter("cupti_resourceslices_watch_errors_total", "", "cupti.resourceslices.watch.errors", "{error}", "Failed lists or watches of this node's ResourceSlices, by reason (forbidden: RBAC; not_served: no resource.k8s.io/v1 API; other); "+
		"the cache keeps its last state and retries.", "reason")
)

// Descs lists the families Snapshot emits.
func Descs() []*snapshot.Desc { return descs.Descs() }

// deviceTypes are the values of the type label: what the driver publishes, folded.
var deviceTypes = []string{"gpu", typeMIG, "other"}

// Snapshot returns the informer's self-metrics. It never blocks on the API server.
func (i *Informer) Snapshot() *snapshot.Snapshot {
	synced := 0.0
	if i.informer.HasSynced() {
		synced = 1
	}
	byType := map[string]int{}
	for _, o := range i.informer.GetStore().List() {
		s, ok := o.(*resourcev1.ResourceSlice)
		if !ok {
			continue
		}
		for _, d := range s.Spec.Devices {
			t := stringAttr(d, attrType)
			if t != "gpu" && t != typeMIG {
				t = "other"
			}
			byType[t]++
		}
	}
	devices := make([]snapshot.Sample, len(deviceTypes))
	for k, t := range deviceTypes {
		devices[k] = snapshot.Sample{LabelValues: []string{t}, Value: float64(byType[t])}
	}
	errs := make([]snapshot.Sample, len(errorReasons))
	for k, r := range errorReasons {
		errs[k] = snapshot.Sample{LabelValues: []string{r}, Value: float64(i.watchErrors[k].Load()), Start: i.start}
	}
	return &snapshot.Snapshot{
		Time: time.Now(),
		Families: []snapshot.Family{
			{Desc: syncedDesc, Samples: []snapshot.Sample{{Value: synced}}},
			{Desc: devicesDesc, Samples: devices},
			{Desc: watchErrorsDesc, Samples: errs},
		},
	}
}
