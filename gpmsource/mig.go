package gpmsource

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// MIG GPU instances: on a GPU in MIG mode, GPM also samples each GPU instance
// (nvmlGpmMigSampleGet), which gives the curated metrics of that instance's work alone. PM
// sampling cannot (CUPTI samples a whole GPU), so these are served whenever GPM reads them,
// in families of their own (cupti_mig_sm_active_ratio, ...: a sum over a GPU's instances and
// the GPU's own series would count the work twice), labelled gpu_instance_id and profile.
// Not measured: no GPU in MIG mode was available (docs/pm-sampling.md "GPM").

// instance is one MIG GPU instance of a GPU.
type instance struct {
	gi      int
	profile string // e.g. 1g.10gb, from the name of its first MIG device
	key     int    // its device index in the MIG aggregator
	pair    *gpm.Pair
	ms      []resolved
	ids     []nvml.GpmMetricId
	probed  bool
	lastEnd uint64
	failing int
}

// migAggregator folds the samples of every MIG instance; labels maps an instance's key (the
// gpu label its aggregator gives it) to the labels of its series: the GPU's device labels,
// then gpu_instance_id and profile.
type migAggregator struct {
	agg    *aggregate.Aggregator
	labels map[string][]string
}

// migLabelNames follow a curated family's labels on its MIG family.
var migLabelNames = []string{"gpu_instance_id", "profile"}

// readMIG reads g's MIG layout every lookupEvery and samples each of its GPU instances.
func (s *Source) readMIG(g *gpu, now time.Time) {
	if now.Sub(g.migSeen) >= lookupEvery || g.migSeen.IsZero() {
		g.migSeen = now
		if s.migLayout(g) {
			s.rebuildMIG()
		}
	}
	ma := s.migAgg.Load()
	if ma == nil {
		return
	}
	ns := uint64(now.UnixNano())
	for _, in := range g.mig {
		if in.lastEnd > 0 && ns < in.lastEnd+uint64(s.cfg.interval)*9/10 {
			continue // see read
		}
		mg, sampled, asked := in.pair.TakeMIG(s.lib, g.dev, in.gi, in.ids...)
		switch {
		case sampled != nvml.SUCCESS, mg != nil && asked != nvml.SUCCESS:
			g.failures["mig"]++
			if in.failing++; in.failing == 1 {
				s.log.Warn("GPM read of a MIG instance failed", "gpu", g.label.Index, "gpu_instance_id", in.gi, "sample", nvml.ErrorString(sampled), "metrics", nvml.ErrorString(asked))
			}
			in.lastEnd = 0
			continue
		case mg == nil:
			in.lastEnd, in.failing = ns, 0
			continue
		}
		r := readingsOf(mg, in.ids)
		if !in.probed {
			in.probed = true
			in.ms = s.served(in.ms, r, "gpu_instance_id", in.gi)
			in.ids = idsOf(in.ms)
		}
		if stale(r) {
			in.pair.Stale()
			continue
		}
		start := in.lastEnd
		in.lastEnd, in.failing = ns, 0
		if start == 0 || start >= ns || len(in.ms) == 0 {
			continue
		}
		b, bad := sampleOf(in.key, in.ms, r, start, ns, s.cfg.interval)
		if len(bad) > 0 {
			g.failures["mig"]++
		}
		if len(b.Metrics) > 0 {
			ma.agg.Add(b)
		}
	}
}

// migLayout reads g's GPU instances; it reports whether they changed. A GPU not in MIG mode
// has none.
func (s *Source) migLayout(g *gpu) bool {
	found := map[int]string{} // GPU instance -> profile
	if cur, _, ret := g.dev.GetMigMode(); ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE {
		n, _ := g.dev.GetMaxMigDeviceCount()
		for i := range n {
			mig, ret := g.dev.GetMigDeviceHandleByIndex(i)
			if ret != nvml.SUCCESS {
				continue // an empty slot answers NOT_FOUND
			}
			gi, ret := mig.GetGpuInstanceId()
			if ret != nvml.SUCCESS {
				continue
			}
			if _, seen := found[gi]; !seen {
				name, _ := mig.GetName()
				_, profile, ok := strings.Cut(name, "MIG ")
				if !ok {
					profile = name
				}
				found[gi] = profile
			}
		}
	}
	same := len(found) == len(g.mig)
	for _, in := range g.mig {
		same = same && found[in.gi] == in.profile
	}
	if same {
		return false
	}
	for _, in := range g.mig {
		in.pair.Free()
	}
	g.mig = nil
	gis := make([]int, 0, len(found))
	for gi := range found {
		gis = append(gis, gi)
	}
	slices.Sort(gis)
	for _, gi := range gis {
		p, ret := gpm.Alloc(s.lib)
		if ret != nvml.SUCCESS {
			continue
		}
		g.mig = append(g.mig, &instance{gi: gi, profile: found[gi], pair: p, ms: g.ms, ids: g.ids})
	}
	if len(found) > 0 {
		s.log.Info("MIG mode: reading GPM per GPU instance", "gpu", g.label.Index, "instances", len(g.mig))
	}
	return true
}

// rebuildMIG gives every MIG instance a key and starts a new MIG aggregator (a changed layout
// starts its counters anew).
func (s *Source) rebuildMIG() {
	s.mu.Lock()
	gpus := slices.Clone(s.gpus)
	s.mu.Unlock()
	ma := &migAggregator{labels: map[string][]string{}}
	var devs []pmdata.Device
	for _, g := range gpus {
		for _, in := range g.mig {
			in.key = len(devs)
			devs = append(devs, pmdata.Device{Index: in.key})
			ma.labels[strconv.Itoa(in.key)] = []string{strconv.Itoa(g.label.Index), g.label.UUID, g.label.Model, g.label.Chip, g.label.PCIBusID,
				strconv.Itoa(in.gi), in.profile}
			in.lastEnd = 0
		}
	}
	if len(devs) == 0 {
		s.migAgg.Store(nil)
		return
	}
	ma.agg = aggregate.New(s.m, devs, catalog(s.ms), s.log, s.aggOptions()...)
	s.migAgg.Store(ma)
}

// migDescs holds the Desc of each MIG family, by the curated family's Desc.
type migDescs struct {
	mu sync.Mutex
	m  map[*snapshot.Desc]*snapshot.Desc
}

// of is the MIG family of curated family d: cupti_mig_<rest of the name>, the OTel name under
// cupti.mig., the instance's labels after d's, then SourceLabel.
func (md *migDescs) of(d *snapshot.Desc) *snapshot.Desc {
	md.mu.Lock()
	defer md.mu.Unlock()
	if o, ok := md.m[d]; ok {
		return o
	}
	o := *d
	o.Name = mapping.NamePrefix + "mig_" + strings.TrimPrefix(d.Name, mapping.NamePrefix)
	o.Help = "Of one MIG GPU instance, from NVML GPM: " + d.Help
	rest, _ := strings.CutPrefix(d.OTelName, "cupti.")
	rest, _ = strings.CutPrefix(rest, "hw.gpu.")
	o.OTelName = "cupti.mig." + rest
	o.LabelNames = slices.Concat(d.LabelNames, migLabelNames, []string{SourceLabel})
	if md.m == nil {
		md.m = map[*snapshot.Desc]*snapshot.Desc{}
	}
	md.m[d] = &o
	return &o
}

// migFamilies are the MIG instances' families, relabelled from the MIG aggregator's.
func (s *Source) migFamilies() []snapshot.Family {
	ma := s.migAgg.Load()
	if ma == nil {
		return nil
	}
	var out []snapshot.Family
	for _, f := range ma.agg.Snapshot().Families {
		if !s.curatedDesc[f.Desc] {
			continue
		}
		nd := len(snapshot.DeviceLabelNames)
		o := snapshot.Family{Desc: s.mig.of(f.Desc)}
		for _, smp := range f.Samples {
			lv, ok := ma.labels[smp.LabelValues[0]]
			if !ok || len(smp.LabelValues) < nd {
				continue
			}
			smp.LabelValues = slices.Concat(lv[:nd], smp.LabelValues[nd:], lv[nd:], []string{GPMSource})
			o.Samples = append(o.Samples, smp)
		}
		if len(o.Samples) > 0 {
			out = append(out, o)
		}
	}
	return out
}

// MIGDescs lists the MIG families a GPU in MIG mode adds (for the metrics reference).
func MIGDescs(m *mapping.Mapper) ([]*snapshot.Desc, error) {
	ms, err := resolve(m, nil)
	if err != nil {
		return nil, err
	}
	var md migDescs
	var out []*snapshot.Desc
	for _, r := range ms {
		met, err := m.Map(r.perfworks, r.props)
		if err != nil {
			return nil, err
		}
		for _, d := range met.Descs() {
			if !slices.ContainsFunc(out, func(o *snapshot.Desc) bool { return o.Name == md.of(d).Name }) {
				out = append(out, md.of(d))
			}
		}
	}
	return out, nil
}
