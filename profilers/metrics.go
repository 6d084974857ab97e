package profilers

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// descs are the families Snapshot emits.
var descs = snapshot.NewTable()

var (
	execEventsDesc = descs.Gauge("cupti_pm_give_way_exec_events", "", "cupti.pm.give_way.exec_events", "1",
		"Whether the give-way watch is woken by the kernel's exec records (1: a profiler is found within milliseconds of its start) or looks at the processes every pmsample.give_way_poll (0: perf events cannot be opened here; the log says why).")
	execLostDesc = descs.Counter("cupti_pm_give_way_exec_records_lost_total", "", "cupti.pm.give_way.exec_records_lost", "{record}",
		"Exec records the kernel dropped because a CPU's ring was full; the watch then read every PID handed out since its last look.")
)

// Descs lists the families Snapshot emits.
func Descs() []*snapshot.Desc { return descs.Descs() }

// Snapshot returns how the watch looks at the processes (exporter.Producer); nothing until Run
// has opened the exec records or found it cannot.
func (w *Watcher) Snapshot() *snapshot.Snapshot {
	snap := &snapshot.Snapshot{Time: time.Now()}
	mode := w.execMode.Load()
	if mode == execUndecided {
		return snap
	}
	on := 0.0
	if mode == execOn {
		on = 1
	}
	snap.Families = []snapshot.Family{
		{Desc: execEventsDesc, Samples: []snapshot.Sample{{Value: on}}},
		{Desc: execLostDesc, Samples: []snapshot.Sample{{Value: float64(w.execLost.Load()), Start: w.started}}},
	}
	return snap
}
