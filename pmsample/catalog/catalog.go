package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Host is MetricHost over a Profiler Host object.
type Host struct {
	lib  *cupti.Lib
	host *cupti.Host
}

// NewHost plans over host, a Profiler Host object of lib; the caller keeps closing host.
func NewHost(lib *cupti.Lib, host *cupti.Host) *Host { return &Host{lib: lib, host: host} }

var metricTypes = []cupti.MetricType{cupti.MetricTypeCounter, cupti.MetricTypeRatio, cupti.MetricTypeThroughput}

func (h *Host) BaseMetrics() ([]BaseMetric, error) {
	var out []BaseMetric
	for _, t := range metricTypes {
		names, err := h.host.BaseMetrics(t)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out = append(out, BaseMetric{Name: n, Type: pmdata.MetricType(t)})
		}
	}
	return out, nil
}

func (h *Host) SubMetrics(b BaseMetric) ([]string, error) {
	subs, err := h.host.SubMetrics(cupti.MetricType(b.Type), b.Name)
	for i, s := range subs {
		subs[i] = strings.TrimPrefix(s, ".")
	}
	return subs, err
}

// Properties are those of the base metric: for a full name CUPTI reports the units of the
// rollup and submetric (e.g. bytes per second for .sum.per_second), while mapping derives
// names from the base metric's units plus the rollup and submetric it parses itself.
func (h *Host) Properties(name string) (pmdata.Properties, error) {
	if n, err := mapping.ParseName(name); err == nil {
		name = n.Base()
	}
	p, err := h.host.Properties(name)
	if err != nil {
		return pmdata.Properties{}, err
	}
	return pmdata.Properties{Type: pmdata.MetricType(p.Type), HWUnit: p.HWUnit, DimUnit: p.DimUnit, Description: p.Description}, nil
}

func (h *Host) Passes(metrics []string) (int, error) {
	img, err := h.host.ConfigImage(metrics)
	if err != nil {
		return 0, err
	}
	defer img.Free()
	return img.Passes()
}

// SinglePassSet lists the metrics of a named single-pass set of the host's chip (CUPTI 13.2+).
// An unknown name is an error listing the chip's sets; a library without the queries gives
// ErrNoSinglePassSets (and the binding's FeatureError, matching cupti.ErrNotSupported).
func (h *Host) SinglePassSet(name string) ([]string, error) {
	chip := h.host.Chip()
	sets, err := h.lib.SinglePassSets(chip)
	if err != nil {
		var fe *cupti.FeatureError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%w: %w", ErrNoSinglePassSets, fe)
		}
		return nil, err
	}
	if !slices.Contains(sets, name) {
		if len(sets) == 0 {
			return nil, fmt.Errorf("no such set: CUPTI has no single-pass sets for %s; list metrics instead", chip)
		}
		return nil, fmt.Errorf("no such set for %s; available: %s", chip, strings.Join(sets, ", "))
	}
	return h.lib.MetricsInSinglePassSet(chip, name)
}

// SinglePassSets lists the chip's single-pass sets (empty without CUPTI 13.2's queries).
func (h *Host) SinglePassSets() ([]string, error) {
	if !h.lib.HasSinglePassSets() {
		return nil, nil
	}
	return h.lib.SinglePassSets(h.host.Chip())
}

// Catalog answers the CLI's `metrics list/describe/plan` for one device or chip.
type Catalog struct {
	Chip string
	hc   *Host
	p    *Planner
}

// MetricInfo is a base metric with its properties.
type MetricInfo struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // counter, ratio, throughput
	HWUnit      string `json:"hw_unit"`
	DimUnit     string `json:"dim_unit"`
	Description string `json:"description,omitempty"`
}

// MetricDetail is what Describe reports.
type MetricDetail struct {
	MetricInfo
	SubMetrics []string `json:"submetrics"` // full names: base.rollup[.submetric]
	Passes     int      `json:"passes"`     // passes the named metric needs alone (first submetric for a base name)
}

// Open opens the metric catalog of target: a CUDA ordinal ("0", read with the device's
// counter availability) or a chip name ("GH100", host only, no GPU needed). Close it after use.
func Open(lib *cupti.Lib, target string) (*Catalog, error) {
	chip, avail := target, []byte(nil)
	if i, err := strconv.Atoi(target); err == nil {
		if chip, err = lib.ChipName(i); err != nil {
			return nil, fmt.Errorf("reading chip name of device %d: %w", i, err)
		}
		avail, _ = lib.CounterAvailability(i) // busy counters: fall back to the chip's full list
	}
	host, err := lib.NewHost(chip, avail)
	if err != nil {
		return nil, fmt.Errorf("opening profiler host for %s: %w", chip, err)
	}
	hc := &Host{lib: lib, host: host}
	p, err := NewPlanner(hc)
	if err != nil {
		host.Close()
		return nil, err
	}
	return &Catalog{Chip: chip, hc: hc, p: p}, nil
}

// SinglePassSet is a named single-pass metric set of the chip (CUPTI 13.2+).
type SinglePassSet struct {
	Name    string   `json:"name"`
	Metrics []string `json:"metrics"`
}

// SinglePassSets lists the chip's named single-pass sets with their metrics; nil when the
// loaded CUPTI lacks the 13.2 queries (or the chip has no sets).
func (c *Catalog) SinglePassSets() ([]SinglePassSet, error) {
	names, err := c.hc.SinglePassSets()
	if err != nil {
		return nil, fmt.Errorf("listing single-pass sets of %s: %w", c.Chip, err)
	}
	var out []SinglePassSet
	for _, n := range names {
		ms, err := c.hc.lib.MetricsInSinglePassSet(c.Chip, n)
		if err != nil {
			return nil, err
		}
		out = append(out, SinglePassSet{Name: n, Metrics: ms})
	}
	return out, nil
}

// PlanSet plans a named single-pass set as one group, as WithMetricSet makes the sampler do.
func (c *Catalog) PlanSet(name string) (PlanResult, error) { return c.p.PlanSet(name) }

// Close frees the host object.
func (c *Catalog) Close() error { return c.hc.host.Close() }

// List returns the base metrics with type and units.
func (c *Catalog) List() ([]MetricInfo, error) { return list(c.p) }

// Describe returns the properties, submetrics and passes of a base or full metric name.
func (c *Catalog) Describe(name string) (MetricDetail, error) { return describe(c.p, name) }

// Plan packs metrics (priority order) into single-pass groups, as the sampler would; with
// multiplex false only one group is built and the rest is reported as rejected.
func (c *Catalog) Plan(metrics []string, multiplex bool) (PlanResult, error) {
	return c.p.Plan(metrics, multiplex, false)
}

// DefaultSet resolves the curated default set for the catalog's chip (see docs/supported-gpus.md).
func (c *Catalog) DefaultSet(curated []mapping.CuratedMetric) (DefaultSet, error) {
	return c.p.resolveDefaults(c.Chip, curated)
}

func typeName(t pmdata.MetricType) string {
	switch t {
	case pmdata.TypeCounter:
		return "counter"
	case pmdata.TypeRatio:
		return "ratio"
	case pmdata.TypeThroughput:
		return "throughput"
	}
	return "unknown"
}

func list(p *Planner) ([]MetricInfo, error) {
	out := make([]MetricInfo, 0, len(p.bases))
	for _, b := range p.bases {
		props, err := p.host.Properties(b.Name)
		if err != nil {
			return nil, fmt.Errorf("reading properties of %s: %w", b.Name, err)
		}
		out = append(out, MetricInfo{Name: b.Name, Type: typeName(b.Type), HWUnit: props.HWUnit, DimUnit: props.DimUnit, Description: props.Description})
	}
	return out, nil
}

func describe(p *Planner, name string) (MetricDetail, error) {
	baseName, rest := splitName(name)
	b, ok := p.base(baseName)
	if !ok {
		return MetricDetail{}, Rejection{Metric: name, Reason: "unknown metric", Alternatives: mapping.Suggest(baseName, p.baseNames(), 3), didYouMean: true}.err()
	}
	props, err := p.host.Properties(b.Name)
	if err != nil {
		return MetricDetail{}, fmt.Errorf("reading properties of %s: %w", b.Name, err)
	}
	d := MetricDetail{MetricInfo: MetricInfo{Name: name, Type: typeName(b.Type), HWUnit: props.HWUnit, DimUnit: props.DimUnit, Description: props.Description}}
	subs, err := p.host.SubMetrics(b)
	if err != nil {
		return d, fmt.Errorf("reading submetrics of %s: %w", b.Name, err)
	}
	for _, s := range subs {
		d.SubMetrics = append(d.SubMetrics, b.Name+"."+s)
	}
	full := name
	if rest == "" && len(subs) > 0 {
		full = b.Name + "." + subs[0]
	}
	if d.Passes, err = p.host.Passes([]string{full}); err != nil {
		return d, fmt.Errorf("counting passes of %s: %w", full, err)
	}
	return d, nil
}
