package gpmsource

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// SourceLabel is the label the curated families carry where Fill serves them: "gpm" on the
// series GPM served, empty (no label, for Prometheus and OTLP) on PM sampling's.
const SourceLabel = "source"

// GPMSource is the value of SourceLabel on the series GPM served.
const GPMSource = "gpm"

// Fill serves the curated families of PM sampling (pm's snapshots) and of GPM (its Source's)
// as one: on each GPU, from PM sampling while it samples, from GPM while it cannot (ModeFill),
// and from GPM alone in ModeOnly; never both for one GPU, so sums and averages over GPUs stay
// right. Every curated family gets the label source (GPMSource on GPM's series). A GPU that
// neither reads shows gaps: its gauges go absent once their window is empty, and PM sampling's
// counters are withheld while it is paused, busy or in error (a flat counter would read as no
// traffic). Every other family of pm passes through unchanged.
type Fill struct {
	pm  interface{ Snapshot() *snapshot.Snapshot } // nil: no PM sampling
	src *Source

	mu    sync.Mutex
	descs map[*snapshot.Desc]*snapshot.Desc // a curated family's Desc -> the same with SourceLabel
}

// Fill returns the producer that serves pm's snapshots with s's curated metrics filled in;
// pm is nil without PM sampling.
func (s *Source) Fill(pm interface{ Snapshot() *snapshot.Snapshot }) *Fill {
	return &Fill{pm: pm, src: s, descs: map[*snapshot.Desc]*snapshot.Desc{}}
}

// serving is who serves a GPU's curated families now.
type serving uint8

const (
	byPM   serving = iota // PM sampling samples it, or nothing else could
	byGPM                 // GPM reads it
	byNone                // neither: gaps
)

// Snapshot joins the newest snapshots of PM sampling and GPM.
func (f *Fill) Snapshot() *snapshot.Snapshot {
	var pm *snapshot.Snapshot
	if f.pm != nil {
		pm = f.pm.Snapshot()
	}
	gs := f.src.curated()
	states := *f.src.state.Load()
	pmStates := f.src.pmStates()
	decide := func(uuid string) (serving, bool) {
		st, gpmGPU := states[strings.ToLower(uuid)]
		switch ps, known := pmStates[strings.ToLower(uuid)]; {
		case known && ps.State == pmdata.StateSampling && !st.wanted:
			return byPM, false
		case gpmGPU && st.wanted:
			return byGPM, st.reading
		case known && (ps.State == pmdata.StatePaused || ps.State == pmdata.StateYielded || ps.State == pmdata.StateBusy || ps.State == pmdata.StateError):
			return byNone, false
		}
		return byPM, false
	}
	type answer struct {
		w       serving
		reading bool
	}
	answers := map[string]answer{} // by uuid label: each GPU decided once, not once a sample
	who := func(uuid string) (serving, bool) {
		a, ok := answers[uuid]
		if !ok {
			a.w, a.reading = decide(uuid)
			answers[uuid] = a
		}
		return a.w, a.reading
	}
	out := &snapshot.Snapshot{}
	var curated []snapshot.Family // the labelled curated families, PM's and GPM's series joined
	at := map[string]int{}        // index in curated by name
	add := func(fam *snapshot.Family, value string, keep func(uuid string, counter bool) bool) {
		d := f.withSource(fam.Desc)
		if d == nil {
			return
		}
		ui := slices.Index(fam.Desc.LabelNames, "uuid")
		i, ok := at[d.Name]
		if !ok {
			i = len(curated)
			at[d.Name] = i
			curated = append(curated, snapshot.Family{Desc: d})
		}
		for _, smp := range fam.Samples {
			if ui < 0 || ui >= len(smp.LabelValues) || !keep(smp.LabelValues[ui], d.Kind == snapshot.KindCounter) {
				continue
			}
			smp.LabelValues = append(slices.Clip(smp.LabelValues), value)
			curated[i].Samples = append(curated[i].Samples, smp)
		}
	}
	if pm != nil {
		out.Time = pm.Time
		for i := range pm.Families {
			fam := &pm.Families[i]
			if !f.src.isCurated(fam.Desc) {
				out.Families = append(out.Families, *fam)
				continue
			}
			add(fam, "", func(uuid string, counter bool) bool {
				switch w, _ := who(uuid); w {
				case byGPM:
					return false
				case byNone:
					return !counter
				}
				return true
			})
		}
	}
	if gs != nil {
		if gs.Time.After(out.Time) {
			out.Time = gs.Time
		}
		for i := range gs.Families {
			fam := &gs.Families[i]
			if f.src.cfg.mode == ModeFill && f.src.cfg.pmFamily != nil && !f.src.cfg.pmFamily(fam.Desc.Name) {
				continue
			}
			add(fam, GPMSource, func(uuid string, counter bool) bool {
				w, reading := who(uuid)
				return w == byGPM && (reading || !counter)
			})
		}
	}
	for _, fam := range curated {
		if len(fam.Samples) > 0 {
			slices.SortFunc(fam.Samples, func(a, b snapshot.Sample) int { return slices.Compare(a.LabelValues, b.LabelValues) })
			out.Families = append(out.Families, fam)
		}
	}
	out.Families = append(out.Families, f.src.extraFamilies()...)
	slices.SortFunc(out.Families, func(a, b snapshot.Family) int { return cmp.Compare(a.Desc.Name, b.Desc.Name) })
	return out
}

// withSource is d with SourceLabel after its labels (one Desc per family, kept); nil when d
// already has such a label (a mapping rule's), which Fill then cannot tell apart.
func (f *Fill) withSource(d *snapshot.Desc) *snapshot.Desc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.descs[d]; ok {
		return o
	}
	var o *snapshot.Desc
	if !slices.Contains(d.LabelNames, SourceLabel) {
		c := *d
		c.LabelNames = append(slices.Clip(d.LabelNames), SourceLabel)
		o = &c
	}
	f.descs[d] = o
	return o
}

// DeviceStatus is GPM's part in serving one GPU.
type DeviceStatus struct {
	Device string // gpu label
	UUID   string
	Ready  bool   // the curated metrics of the GPU are served (by GPM)
	Reason string // what GPM does for it, or why it cannot
}

// Status says, for each GPU GPM serves or should serve, whether it reads it: in ModeOnly every
// GPU with GPM; in ModeFill those whose PM sampling does not sample (a GPU PM sampling samples,
// or one without GPM, has no entry).
func (f *Fill) Status() []DeviceStatus {
	states := *f.src.state.Load()
	pmStates := f.src.pmStates()
	var out []DeviceStatus
	if err := f.src.initErr.Load(); err != nil && f.src.cfg.mode == ModeOnly {
		return []DeviceStatus{{Reason: "gpm.mode=only but NVML cannot be read (" + *err + "): no curated metrics"}}
	}
	for uuid, st := range states {
		if !st.wanted {
			continue
		}
		ds := DeviceStatus{Device: st.gpu, UUID: st.uuid, Ready: st.reading}
		why := "GPM mode (gpm.mode=only)"
		if ps, ok := pmStates[uuid]; ok {
			why = "PM sampling " + string(ps.State)
		}
		switch {
		case st.reading:
			ds.Reason = fmt.Sprintf("curated metrics served from NVML GPM every %s (%s): no kHz maxima, no attribution to kernels", f.src.cfg.interval, why)
		case st.problem == "":
			ds.Reason = "starting: GPM needs two samples"
		default:
			ds.Reason = fmt.Sprintf("GPM cannot read this GPU (%s) and %s: its curated series are gaps", st.problem, why)
		}
		out = append(out, ds)
	}
	slices.SortFunc(out, func(a, b DeviceStatus) int { return cmp.Compare(a.Device, b.Device) })
	return out
}
