package kubepods

import "github.com/cupti-exporter/cupti-exporter/snapshot"

var (
	syncedDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_kubepods_synced", Kind: snapshot.KindGauge,
		Help:     "Whether the cache of this node's pods has been filled from the API server (1) or not yet (0).",
		OTelName: "cupti.kubepods.synced", OTelUnit: "1",
	})
	podsDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_kubepods_pods", Kind: snapshot.KindGauge,
		Help:     "Pods of this node in the cache.",
		OTelName: "cupti.kubepods.pods", OTelUnit: "{pod}",
	})
	lookupsDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_kubepods_lookups_total", Kind: snapshot.KindCounter,
		Help:     "Lookups of a process's pod from its cgroup, by result (found; pending: the pod or its container is not in the cache yet; not_in_pod: the cgroup names no pod).",
		OTelName: "cupti.kubepods.lookups", OTelUnit: "{lookup}", LabelNames: []string{"result"},
	})
	watchErrorsDesc = descs.Add(&snapshot.Desc{
		Name: "cupti_kubepods_watch_errors_total", Kind: snapshot.KindCounter,
		Help:     "Failed lists or watches of this node's pods (the cache keeps its last state and retries).",
		OTelName: "cupti.kubepods.watch.errors", OTelUnit: "{error}",
	})
)

// descs are the families Snapshot emits.
var descs = snapshot.NewTable()

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
