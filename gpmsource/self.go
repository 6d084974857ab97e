package gpmsource

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// descs are the families the GPM source may add beside the curated ones.
var descs = snapshot.NewTable()

// Self-metrics of the GPM source, and the holders of a busy GPU's PM counters.
var (
	samplesDesc  = descs.Counter("cupti_gpm_samples_total", "", "cupti.gpm.samples", "{sample}", "Pairs of NVML GPM samples read into the curated metrics (served while PM sampling cannot read the GPU, or always with gpm.mode=only).", snapshot.DeviceLabelNames...)
	failuresDesc = descs.Counter("cupti_gpm_read_failures_total", "", "cupti.gpm.read.failures", "{read}", "GPM reads that gave no sample of the curated metrics, by reason: sample (nvmlGpmSampleGet failed), metrics (nvmlGpmMetricsGet failed), metric (NVML failed one metric of a pair), invalid (a reading the hardware cannot produce), mig (a read of a MIG instance): the time (of that metric) is a gap in the curated series; no_refresh (a pair that saw no GPM refresh, which reads 0: merged into the next pair, no time lost).", snapshot.DeviceLabels("reason")...)
	holderDesc   = descs.Gauge("cupti_pm_counters_holder_info", "", "cupti.pm.counters.holder", "1", "A process that holds the PM counters of a GPU whose PM sampling is busy (1): a process using the GPU with a profiling library loaded (Nsight Compute's or Nsight Systems' injection, NVIDIA's PerfWorks, DCGM's profiling module, another CUPTI PM client).", snapshot.DeviceLabels("pid", "command", "library")...)
)

// Descs lists the families the GPM source may add beside the curated ones.
func Descs() []*snapshot.Desc { return descs.Descs() }

// publishSelf stores the sample and failure counts of gpus.
func (s *Source) publishSelf(gpus []*gpu) {
	snap := &snapshot.Snapshot{Time: s.cfg.now()}
	samples := snapshot.Family{Desc: samplesDesc}
	failures := snapshot.Family{Desc: failuresDesc}
	for _, g := range gpus {
		labels := deviceLabels(g.label)
		if g.samples > 0 && (s.cfg.selfAll || s.cfg.mode == ModeOnly) {
			samples.Samples = append(samples.Samples, snapshot.Sample{LabelValues: labels, Value: float64(g.samples), Priority: snapshot.PriorityDevice})
		}
		reasons := make([]string, 0, len(g.failures))
		for r := range g.failures {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			failures.Samples = append(failures.Samples, snapshot.Sample{LabelValues: append(slices.Clone(labels), r), Value: float64(g.failures[r]), Priority: snapshot.PriorityDevice})
		}
	}
	for _, f := range []snapshot.Family{samples, failures} {
		if len(f.Samples) > 0 {
			snap.Families = append(snap.Families, f)
		}
	}
	s.self.Store(snap)
}

func deviceLabels(d pmdata.Device) []string {
	return []string{strconv.Itoa(d.Index), d.UUID, d.Model, d.Chip, d.PCIBusID}
}

// extraFamilies are what Fill serves beside the curated families: the GPM self-metrics, the
// MIG instances' families and the holders of busy GPUs' counters.
func (s *Source) extraFamilies() []snapshot.Family {
	out := slices.Clone(s.self.Load().Families)
	out = append(out, s.migFamilies()...)
	if s.cfg.pmStatus == nil {
		return out
	}
	devs := map[string]pmdata.Device{}
	for _, d := range s.cfg.devices() {
		devs[strings.ToLower(d.UUID)] = d
	}
	h := snapshot.Family{Desc: holderDesc}
	for _, st := range s.cfg.pmStatus() {
		if st.State != pmdata.StateBusy {
			continue
		}
		d, ok := devs[strings.ToLower(st.UUID)]
		if !ok {
			d = pmdata.Device{Index: st.Device, UUID: st.UUID}
		}
		for _, p := range s.Holders(st.UUID) {
			h.Samples = append(h.Samples, snapshot.Sample{LabelValues: append(deviceLabels(d), strconv.Itoa(p.PID), p.Command, p.Library), Value: 1, Priority: snapshot.PriorityDevice})
		}
	}
	if len(h.Samples) > 0 {
		out = append(out, h)
	}
	return out
}

// curated is the GPU aggregators' snapshots of the curated families, joined family by family;
// nil before NVML is read.
func (s *Source) curated() *snapshot.Snapshot {
	if !s.started.Load() {
		return nil
	}
	s.mu.Lock()
	gpus := slices.Clone(s.gpus)
	s.mu.Unlock()
	out := &snapshot.Snapshot{}
	at := map[*snapshot.Desc]int{}
	for _, g := range gpus {
		snap := g.agg.Snapshot()
		if snap.Time.After(out.Time) {
			out.Time = snap.Time
		}
		for _, f := range snap.Families {
			if !s.curatedDesc[f.Desc] {
				continue
			}
			i, ok := at[f.Desc]
			if !ok {
				i = len(out.Families)
				at[f.Desc] = i
				out.Families = append(out.Families, snapshot.Family{Desc: f.Desc})
			}
			out.Families[i].Samples = append(out.Families[i].Samples, f.Samples...)
		}
	}
	return out
}

// isCurated reports whether d is a family GPM can serve (and Fill labels).
func (s *Source) isCurated(d *snapshot.Desc) bool { return s.curatedDesc[d] }

// pmStates is PM sampling's state by lower-case UUID; empty without PM sampling.
func (s *Source) pmStates() map[string]pmdata.DeviceStatus {
	out := map[string]pmdata.DeviceStatus{}
	if s.cfg.pmStatus == nil {
		return out
	}
	for _, d := range s.cfg.pmStatus() {
		out[strings.ToLower(d.UUID)] = d
	}
	return out
}
