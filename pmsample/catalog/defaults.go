package catalog

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// DefaultSet is the curated default set resolved for one chip: per curated metric the Perfworks
// name collected there, or why none is.
type DefaultSet struct {
	Chip    string          `json:"chip"`
	Choices []DefaultChoice `json:"choices"`
	Passes  int             `json:"passes"` // GetNumOfPasses of the chosen names together (1, or 0 when none)
}

// DefaultChoice is one curated metric on one chip.
type DefaultChoice struct {
	Name      string        `json:"name"` // Prometheus name, with its labels: cupti_pcie_bytes_total{direction="rx"}
	Headline  bool          `json:"headline"`
	Perfworks string        `json:"perfworks,omitempty"` // the candidate chosen; empty when left out
	Missing   MissingReason `json:"missing,omitempty"`
	Reason    string        `json:"reason,omitempty"` // why left out, in words
	Tried     []string      `json:"tried,omitempty"`  // candidates of this chip, in order
	metric    *mapping.CuratedMetric
	alone     map[string]int // passes of each candidate alone, where asked
}

// MissingReason says why a curated metric is left out on a chip.
type MissingReason string

const (
	MissingFromCatalog MissingReason = "not_in_catalog" // no candidate is in the chip's catalog
	MissingMultiPass   MissingReason = "multi_pass"     // every candidate present needs more than one pass alone
	MissingPassBudget  MissingReason = "pass_budget"    // a candidate fits alone but not with the metrics before it
	MissingUnusable    MissingReason = "unusable"       // CUPTI refused every candidate present (e.g. NVLink on a GPU without links)
)

// Metrics lists the chosen Perfworks names in priority order.
func (d DefaultSet) Metrics() []string {
	var out []string
	for _, c := range d.Choices {
		if c.Perfworks != "" {
			out = append(out, c.Perfworks)
		}
	}
	return out
}

// Label is the curated metric's series as users see it: name{label="value"}.
func seriesLabel(c mapping.CuratedMetric) string {
	if len(c.Labels) == 0 {
		return c.Name
	}
	var parts []string
	for _, l := range c.Labels {
		parts = append(parts, fmt.Sprintf("%s=%q", l.Name, l.Value))
	}
	return c.Name + "{" + strings.Join(parts, ",") + "}"
}

// resolveDefaults picks, per curated metric in priority order, the first of the chip's
// candidates that is in the catalog and keeps GetNumOfPasses at one with the metrics chosen
// before it, so that when the pass budget runs out the least important metrics are the ones
// left out. Every left-out metric carries its reason.
func (p *Planner) resolveDefaults(chip string, curated []mapping.CuratedMetric) (DefaultSet, error) {
	set := DefaultSet{Chip: chip}
	var chosen []string
	for i := range curated {
		c := &curated[i]
		ch := DefaultChoice{Name: seriesLabel(*c), Headline: c.Headline, Tried: c.For(chip), metric: c, alone: map[string]int{}}
		var present []string
		for _, name := range ch.Tried {
			if p.inCatalog(name) {
				present = append(present, name)
			}
		}
		var refused []string
		for _, name := range present {
			n, err := p.host.Passes(append(slices.Clone(chosen), name))
			if err == nil && n == 1 {
				ch.Perfworks = name
				chosen = append(chosen, name)
				break
			}
			if err != nil && len(chosen) == 0 {
				refused = append(refused, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			alone, err := p.host.Passes([]string{name})
			if err != nil {
				refused = append(refused, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			ch.alone[name] = alone
		}
		if ch.Perfworks == "" {
			ch.Missing, ch.Reason = missingReason(chip, ch, present, refused)
		}
		set.Choices = append(set.Choices, ch)
	}
	if len(chosen) > 0 {
		n, err := p.host.Passes(chosen)
		if err != nil {
			return set, fmt.Errorf("counting passes of the default set of %s: %w", chip, err)
		}
		set.Passes = n
	}
	return set, nil
}

func missingReason(chip string, ch DefaultChoice, present, refused []string) (MissingReason, string) {
	switch {
	case len(present) == 0:
		return MissingFromCatalog, fmt.Sprintf("not in the catalog of %s (tried %s)", chip, strings.Join(ch.Tried, ", "))
	case len(refused) == len(present):
		return MissingUnusable, "CUPTI refused every candidate: " + strings.Join(refused, "; ")
	}
	fitsAlone := false
	var counts []string
	for _, name := range present {
		if n, ok := ch.alone[name]; ok {
			fitsAlone = fitsAlone || n == 1
			counts = append(counts, fmt.Sprintf("%s needs %d", name, n))
		}
	}
	if !fitsAlone {
		return MissingMultiPass, "every candidate needs more than one pass alone (" + strings.Join(counts, ", ") + ")"
	}
	return MissingPassBudget, "does not fit in one pass with the more important metrics before it"
}

// inCatalog reports whether a full name is a known base with a valid rollup or submetric.
func (p *Planner) inCatalog(name string) bool {
	baseName, rest := splitName(name)
	b, ok := p.base(baseName)
	if !ok {
		return false
	}
	subs, err := p.host.SubMetrics(b)
	return err != nil || len(subs) == 0 || slices.Contains(subs, rest)
}

// PlanDefaults plans the curated default set of a chip: the resolved one-pass set, and with
// multiplex the metrics the pass budget left out (their first candidate present) in further
// groups. Left-out metrics are reported as rejections with their reasons.
func (p *Planner) PlanDefaults(chip string, curated []mapping.CuratedMetric, multiplex bool) (PlanResult, DefaultSet, error) {
	set, err := p.resolveDefaults(chip, curated)
	if err != nil {
		return PlanResult{}, set, err
	}
	names := set.Metrics()
	var rejected []Rejection
	for _, c := range set.Choices {
		if c.Perfworks != "" {
			continue
		}
		if multiplex && c.Missing == MissingPassBudget {
			for _, name := range c.Tried {
				if n, ok := c.alone[name]; ok && n == 1 {
					names = append(names, name)
					break
				}
			}
			continue
		}
		rejected = append(rejected, Rejection{Metric: c.Name, Reason: c.Reason})
	}
	if len(names) == 0 {
		errs := []error{fmt.Errorf("planning pm sampling for %s: no default metric left to sample", chip)}
		for _, r := range rejected {
			errs = append(errs, r.err())
		}
		return PlanResult{}, set, errors.Join(errs...)
	}
	plan, err := p.Plan(names, multiplex, false)
	plan.Rejected = append(plan.Rejected, rejected...)
	return plan, set, err
}

// OneCandidateEach refuses an explicit metric list that names two candidates of one curated
// metric: both would feed the same series.
func OneCandidateEach(metrics []string, curated []mapping.CuratedMetric) error {
	owner := map[string]string{}
	for _, c := range curated {
		for _, k := range c.Candidates {
			owner[k.Perfworks] = seriesLabel(c)
		}
	}
	first := map[string]string{}
	for _, m := range metrics {
		s, ok := owner[m]
		if !ok {
			continue
		}
		if o, dup := first[s]; dup && o != m {
			return fmt.Errorf("metrics %s and %s both feed %s: keep one", o, m, s)
		}
		first[s] = m
	}
	return nil
}
