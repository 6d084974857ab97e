package activity

import (
	"slices"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var (
	recordsDesc           = descs.Counter("cupti_activity_records_total", "", "cupti.activity.records", "{record}", "Activity records received from traced processes, by kind.", "kind")
	droppedDesc           = descs.Counter("cupti_activity_dropped_records_total", "", "cupti.activity.records.dropped", "{record}", "Activity records lost before aggregation, by reason (sender-side counters and receiver-side drops).", "reason")
	processesDesc         = descs.Gauge("cupti_activity_processes", "", "cupti.activity.processes", "{process}", "Traced processes connected to the activity socket.")
	connectionsDesc       = descs.Counter("cupti_activity_connections_total", "", "cupti.activity.connections", "{connection}", "Connections accepted on the activity socket.")
	connDroppedDesc       = descs.Counter("cupti_activity_dropped_connections_total", "", "cupti.activity.connections.dropped", "{connection}", "Activity connections refused or closed by the receiver, by reason (malformed, limit, read_error, hello_timeout, evicted_no_hello, evicted_idle, evicted_claimed, evicted_fair_share, memory_budget, identity_refused, identity_limit).", "reason")
	socketRecreatedDesc   = descs.Counter("cupti_activity_socket_recreations_total", "", "cupti.activity.socket.recreations", "{event}", "Times the activity socket file was found removed or replaced (by reason) and re-created; processes that started in between could not connect.", "reason")
	memoryDesc            = descs.Gauge("cupti_activity_memory_bytes", "bytes", "cupti.activity.memory", "By", "Memory the activity receiver holds (kernel-name tables, frame buffers, per-connection and per-GPU state), as charged to its budget.")
	memoryBudgetDesc      = descs.Gauge("cupti_activity_memory_budget_bytes", "bytes", "cupti.activity.memory.limit", "By", "The activity receiver's memory budget (--activity.memory-budget); past it, connections and devices are refused and counted.")
	foldedDesc            = descs.Counter("cupti_activity_kernels_folded_total", "", "cupti.activity.kernels.folded", "{record}", "Kernel records counted under kernel=\"other\": their name is outside the top kernels by GPU time (--activity.top-kernels), or the name table is full.")
	namesNotDemangledDesc = descs.Counter("cupti_activity_kernel_names_not_demangled_total", "", "cupti.activity.kernel_names.not_demangled", "{name}", "Mangled kernel names shortened as text instead of demangled, by reason: too_long (over 1 KiB); "+
		"cast_operators, template_copies, pack_expansions, local_names, substitutions, nesting (shapes on which "+
		"demangling costs more than linear time); budget (the demangling CPU budget was spent: tried again later).", "reason")
	tracedDesc = descs.Counter("cupti_activity_traced_seconds_total", "seconds", "cupti.activity.traced_time", "s", "Process-seconds that traced processes reported as traced (coverage spans), complete or lossy (records of the span were lost).", "state")
)

// Label values that always have a series, so that rates start from zero.
var (
	kindLabels = map[record.Kind]string{record.KindKernel: "kernel", record.KindMemcpy: "memcpy", record.KindMemset: "memset"}
	// SenderDropReasons are the drop reasons of the wire format (docs/wire-format.md).
	SenderDropReasons = []string{
		"buffer_pool_exhausted", "queue_full", "cupti_dropped", "version_refused", "unknown_record", "name_table_full",
	}
	// Receiver-side reasons.
	receiverDropReasons   = []string{"unknown_kind", "unknown_device", "refused_connection"}
	socketRecreateReasons = []string{"removed", "replaced"}
	connDropReasons       = []string{"malformed", "limit", "read_error", "hello_timeout", "evicted_no_hello", "evicted_idle", "evicted_claimed", "evicted_fair_share", "memory_budget", "identity_refused", "identity_limit"}
)

// buildLocked copies the state into a new snapshot; a.mu is held.
func (a *Aggregator) buildLocked() *snapshot.Snapshot {
	now := a.cfg.now()
	a.expireLocked(now)
	fs := make([]snapshot.Family, 0, 12)
	fs = a.kernels.families(fs)
	fs = a.podFamilies(fs)
	fs = a.memFamilies(fs)
	fs = a.splitFamilies(fs)

	rec := snapshot.Family{Desc: recordsDesc}
	for _, k := range []record.Kind{record.KindKernel, record.KindMemcpy, record.KindMemset} {
		rec.Samples = append(rec.Samples, a.counter(float64(a.records[k]), kindLabels[k]))
	}
	drop := snapshot.Family{Desc: droppedDesc}
	for _, r := range append(slices.Clone(SenderDropReasons), receiverDropReasons...) {
		if _, ok := a.dropped[r]; !ok {
			drop.Samples = append(drop.Samples, a.counter(0, r))
		}
	}
	for r, v := range a.dropped {
		drop.Samples = append(drop.Samples, a.counter(float64(v), r))
	}
	cd := snapshot.Family{Desc: connDroppedDesc}
	for _, r := range connDropReasons {
		if _, ok := a.connDrops[r]; !ok {
			cd.Samples = append(cd.Samples, a.counter(0, r))
		}
	}
	for r, v := range a.connDrops {
		cd.Samples = append(cd.Samples, a.counter(float64(v), r))
	}
	fs = append(fs, rec, sorted(drop),
		snapshot.Family{Desc: processesDesc, Samples: []snapshot.Sample{{Value: float64(len(a.procs))}}},
		snapshot.Family{Desc: connectionsDesc, Samples: []snapshot.Sample{a.counter(float64(a.conns))}},
		sorted(cd),
		snapshot.Family{Desc: tracedDesc, Samples: []snapshot.Sample{
			a.counter(a.tracedSeconds, "complete"), a.counter(a.lossySeconds, "lossy")}},
		a.invalidReportsFamily(),
		a.deviceEvictionsFamily(),
		a.podResolutionFamily(),
		snapshot.Family{Desc: foldedDesc, Samples: []snapshot.Sample{a.counter(float64(a.kernels.folded))}},
		a.names.notDemangledFamily(a.start),
		snapshot.Family{Desc: socketRecreatedDesc, Samples: []snapshot.Sample{
			a.counter(float64(a.recreated[0]), socketRecreateReasons[0]), a.counter(float64(a.recreated[1]), socketRecreateReasons[1])}},
	)
	fs = a.identityFamilies(fs)
	if b := a.cfg.budget; b != nil {
		fs = append(fs,
			snapshot.Family{Desc: memoryDesc, Samples: []snapshot.Sample{{Value: float64(b.Used())}}},
			snapshot.Family{Desc: memoryBudgetDesc, Samples: []snapshot.Sample{{Value: float64(b.Limit())}}})
	}
	return &snapshot.Snapshot{Time: now, Families: fs}
}

func (a *Aggregator) counter(v float64, labels ...string) snapshot.Sample {
	return snapshot.Sample{LabelValues: labels, Value: v, Start: a.start}
}

// sorted orders a family's samples by label values, so snapshots are deterministic.
func sorted(f snapshot.Family) snapshot.Family {
	slices.SortFunc(f.Samples, func(x, y snapshot.Sample) int {
		return slices.CompareFunc(x.LabelValues, y.LabelValues, strings.Compare)
	})
	return f
}

// descs are the families the aggregator can emit, declared beside the code that fills them.
var descs = snapshot.NewTable()

// Descs lists every family the aggregator can emit, for checks of the names that dashboards
// and alert rules query (a recording may not exercise them all).
func Descs() []*snapshot.Desc { return descs.Descs() }
