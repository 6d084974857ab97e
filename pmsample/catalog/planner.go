package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// MetricHost is what planning needs from the Profiler Host API of one chip. Host
// implements it with the binding; tests implement it with a table.
type MetricHost interface {
	// BaseMetrics lists every base metric of the chip with its type.
	BaseMetrics() ([]BaseMetric, error)
	// SubMetrics lists the rollup/submetric suffixes valid for a base metric (no leading dot).
	SubMetrics(b BaseMetric) ([]string, error)
	// Properties are the properties of a base or full metric name.
	Properties(name string) (pmdata.Properties, error)
	// Passes is the number of passes the metrics need together (GetNumOfPasses).
	Passes(metrics []string) (int, error)
	// SinglePassSet lists the metrics of a named single-pass set; ErrNoSinglePassSets when
	// CUPTI lacks the 13.2 queries.
	SinglePassSet(name string) ([]string, error)
}

type BaseMetric struct {
	Name string
	Type pmdata.MetricType
}

// ErrNoSinglePassSets: the loaded CUPTI lacks the 13.2 set queries (the wrapped binding error says
// which version is needed and which was loaded).
var ErrNoSinglePassSets = errors.New("named single-pass sets unavailable")

// Group is a set of metrics CUPTI can sample in one pass.
type Group struct {
	Metrics []string `json:"metrics"`
}

// Rejection is a requested metric left out of the plan, with why and what to use instead.
type Rejection struct {
	Metric       string   `json:"metric"`
	Reason       string   `json:"reason"`
	Alternatives []string `json:"alternatives,omitempty"`
	didYouMean   bool     // Alternatives are nearest names, not single-pass replacements
}

// PlanResult is the outcome of planning: single-pass groups in priority order and the
// metrics left out.
type PlanResult struct {
	Groups   []Group     `json:"groups"`
	Rejected []Rejection `json:"rejected,omitempty"`
}

// Metrics lists the metrics of every group, in group order.
func (p PlanResult) Metrics() []string {
	var out []string
	for _, g := range p.Groups {
		out = append(out, g.Metrics...)
	}
	return out
}

// Planner turns requested metrics into single-pass groups.
type Planner struct {
	host  MetricHost
	bases []BaseMetric // cached
}

func NewPlanner(h MetricHost) (*Planner, error) {
	bases, err := h.BaseMetrics()
	if err != nil {
		return nil, fmt.Errorf("listing base metrics: %w", err)
	}
	return &Planner{host: h, bases: bases}, nil
}

// Plan validates metrics (priority order) and packs them greedily into single-pass groups:
// each metric joins the first group it fits in (GetNumOfPasses stays 1). With multiplex false
// only one group is built and metrics that do not fit are rejected. With strict, any
// rejection is an error (explicit requests); otherwise rejections are reported (defaults).
func (p *Planner) Plan(metrics []string, multiplex, strict bool) (PlanResult, error) {
	var res PlanResult
	seen := map[string]bool{}
	for _, m := range metrics {
		if seen[m] {
			continue
		}
		seen[m] = true
		if rej, ok := p.check(m); !ok {
			if strict {
				return res, rej.err()
			}
			res.Rejected = append(res.Rejected, rej)
			continue
		}
		placed := false
		for i := range res.Groups {
			n, err := p.host.Passes(append(slices.Clone(res.Groups[i].Metrics), m))
			if err == nil && n == 1 {
				res.Groups[i].Metrics = append(res.Groups[i].Metrics, m)
				placed = true
				break
			}
		}
		switch {
		case placed:
		case len(res.Groups) == 0 || multiplex:
			res.Groups = append(res.Groups, Group{Metrics: []string{m}})
		default:
			rej := Rejection{Metric: m, Reason: "does not fit in one pass with the metrics before it; enable multiplexing or drop a metric listed before it"}
			if strict {
				return res, rej.err()
			}
			res.Rejected = append(res.Rejected, rej)
		}
	}
	if len(res.Groups) == 0 {
		errs := []error{errors.New("planning pm sampling: no metric left to sample")}
		for _, r := range res.Rejected {
			errs = append(errs, r.err())
		}
		return res, errors.Join(errs...)
	}
	return res, nil
}

// PlanSet plans a named single-pass set (CUPTI 13.2+) as one group.
func (p *Planner) PlanSet(name string) (PlanResult, error) {
	ms, err := p.host.SinglePassSet(name)
	if err != nil {
		return PlanResult{}, fmt.Errorf("planning single-pass set %q: %w", name, err)
	}
	if len(ms) == 0 {
		return PlanResult{}, fmt.Errorf("planning single-pass set %q: CUPTI lists no metric in it", name)
	}
	return PlanResult{Groups: []Group{{Metrics: ms}}}, nil
}

func (r Rejection) err() error {
	msg := fmt.Sprintf("metric %q: %s", r.Metric, r.Reason)
	switch {
	case len(r.Alternatives) > 0 && r.didYouMean:
		msg += "; did you mean " + strings.Join(r.Alternatives, ", ") + "? (`metrics list` shows them all)"
	case len(r.Alternatives) > 0:
		msg += "; single-pass alternatives: " + strings.Join(r.Alternatives, ", ")
	}
	return errors.New(msg)
}

// splitName splits a full Perfworks name into its base (up to and including the first
// component holding "__") and the rollup/submetric suffix.
func splitName(name string) (base, rest string) {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if strings.Contains(p, "__") {
			return strings.Join(parts[:i+1], "."), strings.Join(parts[i+1:], ".")
		}
	}
	return name, ""
}

func (p *Planner) base(name string) (BaseMetric, bool) {
	for _, b := range p.bases {
		if b.Name == name {
			return b, true
		}
	}
	return BaseMetric{}, false
}

func (p *Planner) baseNames() []string {
	out := make([]string, len(p.bases))
	for i, b := range p.bases {
		out[i] = b.Name
	}
	return out
}

// check validates one metric alone: known base, valid suffix, one pass.
func (p *Planner) check(m string) (Rejection, bool) {
	baseName, rest := splitName(m)
	b, ok := p.base(baseName)
	if !ok {
		return Rejection{Metric: m, Reason: "unknown metric", Alternatives: mapping.Suggest(baseName, p.baseNames(), 3), didYouMean: true}, false
	}
	subs, err := p.host.SubMetrics(b)
	if err == nil && len(subs) > 0 && !slices.Contains(subs, rest) {
		var alts []string
		for _, s := range mapping.Suggest(rest, subs, 3) {
			alts = append(alts, baseName+"."+s)
		}
		reason := fmt.Sprintf("unknown rollup or submetric %q", rest)
		if rest == "" {
			reason = "a full name needs a rollup (.sum, .avg, .max, .min) and maybe a submetric"
		}
		return Rejection{Metric: m, Reason: reason, Alternatives: alts, didYouMean: true}, false
	}
	n, err := p.host.Passes([]string{m})
	if err != nil {
		return Rejection{Metric: m, Reason: fmt.Sprintf("not usable for pm sampling on this device: %v", err)}, false
	}
	if n > 1 {
		return Rejection{Metric: m, Reason: fmt.Sprintf("needs %d passes alone; pm sampling takes single-pass metrics only", n),
			Alternatives: p.alternatives(b, rest)}, false
	}
	return Rejection{}, true
}

// alternatives proposes up to three single-pass metrics on the same hardware unit as b, with
// the same suffix where valid, nearest names first.
func (p *Planner) alternatives(b BaseMetric, rest string) []string {
	unit := b.Name[:strings.Index(b.Name, "__")+2]
	var same []string
	for _, c := range p.bases {
		if c.Name != b.Name && strings.HasPrefix(c.Name, unit) && c.Type == b.Type {
			same = append(same, c.Name)
		}
	}
	for _, c := range p.bases {
		if c.Name != b.Name && strings.HasPrefix(c.Name, unit) && c.Type != b.Type {
			same = append(same, c.Name)
		}
	}
	ranked := mapping.Suggest(b.Name, same, 10)
	ranked = append(ranked, same...) // Suggest may cut by distance; keep the rest as fallback
	var out []string
	tried := map[string]bool{}
	for _, name := range ranked {
		if len(out) == 3 || len(tried) == 12 {
			break
		}
		if tried[name] {
			continue
		}
		tried[name] = true
		c, _ := p.base(name)
		full := name + "." + rest
		if subs, err := p.host.SubMetrics(c); err == nil && len(subs) > 0 && !slices.Contains(subs, rest) {
			full = name + "." + subs[0]
		}
		if n, err := p.host.Passes([]string{full}); err == nil && n == 1 {
			out = append(out, full)
		}
	}
	return out
}
