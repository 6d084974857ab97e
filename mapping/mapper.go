package mapping

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Mapper maps full Perfworks names to metrics: through a rule (user rules first, then the
// curated table) or, without one, through the derived naming of docs/metric-naming.md.
// It remembers every series it handed out and refuses a second Perfworks name for the same
// series (name and labels), so collisions surface at Map instead of as duplicate series at
// scrape time. A Mapper is safe for concurrent use.
type Mapper struct {
	user    map[string]*Rule // user match rules, by Match
	regexes []*Rule          // user regex rules, in file order
	curated map[string]*Rule // curated rules not replaced by a user rule, by Match

	mu     sync.Mutex
	descs  map[string]*snapshot.Desc // by Prometheus name: one *Desc per family
	owners map[string]string         // series key -> full Perfworks name
}

// New returns a Mapper with the curated table and the given rules; a rule whose match is a
// curated metric replaces it. Rules are checked (as ParseRules does) and checked for
// collisions with each other and with the curated table.
func New(rules ...Rule) (*Mapper, error) {
	user := make([]Rule, len(rules))
	copy(user, rules)
	for i := range user {
		if user[i].source == "" {
			user[i].source = fmt.Sprintf("#%d", i+1)
		}
		if err := user[i].check(); err != nil {
			return nil, err
		}
	}
	if err := checkCollisions(user); err != nil {
		return nil, err
	}
	m := &Mapper{user: map[string]*Rule{}, curated: map[string]*Rule{}, descs: map[string]*snapshot.Desc{}, owners: map[string]string{}}
	// A user rule for any candidate of a curated metric replaces that metric on every chip;
	// the collision check sees each remaining curated metric once, under its GH100 name.
	var kept []*curatedEntry
	all := make([]Rule, 0, len(curatedTable)+len(user))
	for i := range curatedTable {
		e := &curatedTable[i]
		replaced := slices.ContainsFunc(e.candidates(), func(c Candidate) bool {
			return slices.ContainsFunc(user, func(u Rule) bool { return u.Match == c.Perfworks })
		})
		if !replaced {
			r := e.Rule
			r.source = "curated " + r.Name // named in collision errors too
			kept = append(kept, e)
			all = append(all, r)
		}
	}
	all = append(all, user...)
	if err := checkCollisions(all); err != nil {
		return nil, err
	}
	for i, e := range kept {
		r := &all[i] // kept[i] is all[i]
		for _, c := range e.candidates() {
			m.curated[c.Perfworks] = r
		}
	}
	for i := range user {
		switch r := &user[i]; {
		case r.re != nil:
			m.regexes = append(m.regexes, r)
		default:
			m.user[r.Match] = r
		}
	}
	return m, nil
}

// Curated lists the curated DCGM-comparable metrics in priority order, with the full
// Perfworks names to collect for them.
func (m *Mapper) Curated() []CuratedMetric { return curatedList() }

// lookup finds the rule for a full name and the function that expands its templates.
func (m *Mapper) lookup(full string) (*Rule, func(string) string) {
	id := func(s string) string { return s }
	if r := m.user[full]; r != nil {
		return r, id
	}
	for _, r := range m.regexes {
		if idx := r.re.FindStringSubmatchIndex(full); idx != nil {
			return r, func(s string) string { return string(r.re.ExpandString(nil, s, full, idx)) }
		}
	}
	return m.curated[full], id
}

// Map returns the metric for a full Perfworks name (with rollup and submetric) of a base
// metric with properties p. Errors name the offending part of the name, a rule whose name
// does not fit the metric's unit, or the metric that already owns the same series.
func (m *Mapper) Map(name string, p pmdata.Properties) (Metric, error) {
	n, err := ParseName(name)
	if err != nil {
		return Metric{}, err
	}
	if err := n.checkType(p.Type); err != nil {
		return Metric{}, fmt.Errorf("map %s: %w", name, err)
	}
	d := derive(n, p)
	stem, help, otel := d.stem, d.help, d.otelName
	var labels, otelAttrs []snapshot.Label
	owner := name // who owns the series: the Perfworks name, or the curated metric whatever its chip's name
	if r, expand := m.lookup(name); r != nil {
		if m.curated[name] == r {
			owner = r.source
		}
		suffix := strings.TrimPrefix(promName("", "", d.unit, d.kind), "_")
		main := expand(r.Name)
		stem = strings.TrimSuffix(main, "_"+suffix)
		if suffix == "" {
			stem = main
		}
		if !ruleNameFits(main, stem, suffix, d.kind) {
			return Metric{}, fmt.Errorf("map %s: mapping %s: name %q must be %s<words>_%s (the metric is a %s in %q)",
				name, r.where(), main, NamePrefix, suffix, d.kind, d.unit)
		}
		switch {
		case r.Help != "":
			help = r.Help
		case r.re != nil: // one help for every metric the rule may put in one family
			help = fmt.Sprintf("Perfworks metrics matching %s.", r.Regex)
		}
		otel = "cupti." + strings.TrimPrefix(stem, NamePrefix) // follows the rule's name
		if r.OTelName != "" {
			otel = expand(r.OTelName)
		}
		if !otelNameRE.MatchString(otel) {
			return Metric{}, fmt.Errorf("map %s: mapping %s: otel_name expands to %q, not a valid OTel name", name, r.where(), otel)
		}
		labels = r.labelList(expand)
		otelAttrs = r.otelAttributes
		for _, l := range labels {
			if l.Value == "" {
				return Metric{}, fmt.Errorf("map %s: mapping %s: label %q expands to an empty value", name, r.where(), l.Name)
			}
		}
	}
	labelNames := snapshot.DeviceLabels(labelNamesOf(labels)...)
	out := Metric{Perfworks: name, Labels: labels, Scale: d.scale, owner: owner}
	mk := func(stat, what string) *snapshot.Desc {
		desc := &snapshot.Desc{
			Name: promName(stem, stat, d.unit, d.kind), Help: help, Kind: d.kind, Unit: d.unit,
			OTelName: otel, OTelUnit: d.ucum, LabelNames: labelNames, OTelAttributes: otelAttrs,
		}
		if stat != "" {
			desc.OTelName = statOTelName(otel, stat)
		}
		if what != "" {
			desc.Help = strings.TrimSuffix(help, ".") + ". " + what
		}
		return desc
	}
	if d.kind == snapshot.KindCounter {
		out.Desc = mk("", "")
	} else {
		out.Desc = mk("", "Time-weighted mean over the window.")
		out.Max = mk("max", "Maximum over the window.")
		out.Min = mk("min", "Minimum over the window.")
	}
	if err := m.register(&out); err != nil {
		return Metric{}, fmt.Errorf("map %s: %w", name, err)
	}
	return out, nil
}

// statOTelName names a window statistic (max, min) of a gauge: the main name + "." + stat,
// except that a name of the semantic conventions' hw. namespace moves to the vendor
// namespace (hw.gpu.memory.utilization: cupti.gpu.memory.utilization.max), since the
// conventions define no such statistic and names under hw. are theirs.
func statOTelName(otel, stat string) string {
	if rest, ok := strings.CutPrefix(otel, "hw."); ok {
		otel = "cupti." + rest
	}
	return otel + "." + stat
}

// ruleNameFits reports whether a rule's name is <stem>_<suffix> with a stem of its own,
// and free of the suffixes promlint keeps for other types.
func ruleNameFits(name, stem, suffix string, kind snapshot.Kind) bool {
	switch {
	case !promNameRE.MatchString(name), stem+"_" == NamePrefix || stem == NamePrefix:
		return false
	case suffix == "":
		return !hasReservedSuffix(name)
	}
	return stem != name
}

func labelNamesOf(labels []snapshot.Label) []string {
	out := make([]string, len(labels))
	for i, l := range labels {
		out[i] = l.Name
	}
	return out
}

// register claims the series of met, reusing the *Desc of a family that already exists.
// Either every desc of met is claimed or none is.
func (m *Mapper) register(met *Metric) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	descs := []**snapshot.Desc{&met.Desc}
	if met.Max != nil {
		descs = append(descs, &met.Max, &met.Min)
	}
	for _, dp := range descs {
		d := *dp
		key := seriesKey(d.Name, met.Labels)
		if o, ok := m.owners[key]; ok && o != met.owner {
			return fmt.Errorf("series %s is already produced by %s: rename one of them with a mapping rule", key, o)
		}
		if old := m.descs[d.Name]; old != nil && !sameFamily(old, d) {
			return fmt.Errorf("metric %s already exists with another type, unit, help or labels (for %s): rename one of them with a mapping rule", d.Name, m.ownerOf(d.Name))
		}
	}
	for _, dp := range descs {
		if old := m.descs[(*dp).Name]; old != nil {
			*dp = old
		} else {
			m.descs[(*dp).Name] = *dp
		}
		m.owners[seriesKey((*dp).Name, met.Labels)] = met.owner
	}
	return nil
}

func (m *Mapper) ownerOf(name string) string {
	for k, v := range m.owners {
		if strings.HasPrefix(k, name+"{") {
			return v
		}
	}
	return "?"
}

func sameFamily(a, b *snapshot.Desc) bool {
	return a.Name == b.Name && a.Help == b.Help && a.Kind == b.Kind && a.Unit == b.Unit &&
		a.OTelName == b.OTelName && a.OTelUnit == b.OTelUnit && slices.Equal(a.LabelNames, b.LabelNames) &&
		slices.Equal(a.OTelAttributes, b.OTelAttributes)
}
