package kubepods

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// descs are the families Snapshot emits.
var descs = snapshot.NewTable()

var (
	syncedDesc      = descs.Gauge("cupti_kubepods_synced", "", "cupti.kubepods.synced", "1", "Whether the cache of this node's pods has been filled from the API server (1) or not yet (0).")
	podsDesc        = descs.Gauge("cupti_kubepods_pods", "", "cupti.kubepods.pods", "{pod}", "Pods of this node in the cache.")
	lookupsDesc     = descs.Counter("cupti_kubepods_lookups_total", "", "cupti.kubepods.lookups", "{lookup}", "Lookups of a process's pod from its cgroup, by result (found; pending: the pod or its container is not in the cache yet; not_in_pod: the cgroup names no pod).", "result")
	watchErrorsDesc = descs.Counter("cupti_kubepods_watch_errors_total", "", "cupti.kubepods.watch.errors", "{error}", "Failed lists or watches of this node's pods (the cache keeps its last state and retries).")
)

// Descs lists the families Snapshot emits.
func Descs() []*snapshot.Desc { return descs.Descs() }

// Snapshot returns the resolver's self-metrics. It never blocks on the API server.
func (r *Resolver) Snapshot() *snapshot.Snapshot {
	synced := 0.0
	if r.informer.HasSynced() {
		synced = 1
	}
	lookups := make([]snapshot.Sample, 0, len(resultNames))
	for _, res := range []Result{Found, NotInPod, Pending} {
		lookups = append(lookups, snapshot.Sample{
			LabelValues: []string{res.String()}, Value: float64(r.lookups[res].Load()), Start: r.start})
	}
	return &snapshot.Snapshot{
		Time: r.now(),
		Families: []snapshot.Family{
			{Desc: syncedDesc, Samples: []snapshot.Sample{{Value: synced}}},
			{Desc: podsDesc, Samples: []snapshot.Sample{{Value: float64(len(r.informer.GetStore().ListKeys()))}}},
			{Desc: lookupsDesc, Samples: lookups},
			{Desc: watchErrorsDesc, Samples: []snapshot.Sample{{Value: float64(r.watchErrors.Load()), Start: r.start}}},
		},
	}
}
