package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/pipeline"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
)

// runMetrics answers `metrics list`, `metrics describe NAME` and `metrics plan m1,m2` from
// the CUPTI catalog of a device or chip.
func runMetrics(cmd string, logger *slog.Logger, cfg *pipeline.Config, cl *cli, stdout io.Writer) error {
	lib, err := cupti.Open(cupti.Options{LibraryPath: cfg.CUPTI.Library})
	if err != nil {
		return fmt.Errorf("reading the metric catalog: %w", err)
	}
	defer lib.Close()
	cat, err := catalog.Open(lib, cl.metricsChip)
	if err != nil {
		return err
	}
	defer cat.Close()
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	switch cmd {
	case cmdList:
		ms, err := cat.List()
		if err != nil {
			return err
		}
		fmt.Fprintln(tw, "METRIC\tTYPE\tHW UNIT\tDIM UNIT")
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, m.Type, m.HWUnit, m.DimUnit)
		}
	case cmdDescribe:
		d, err := cat.Describe(cl.describeName)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "name\t%s\ntype\t%s\nhw unit\t%s\ndim unit\t%s\npasses\t%d\ndescription\t%s\n",
			d.Name, d.Type, d.HWUnit, d.DimUnit, d.Passes, d.Description)
		for _, s := range d.SubMetrics {
			fmt.Fprintf(tw, "submetric\t%s\n", s)
		}
	case cmdPlan:
		var names []string
		for _, n := range strings.Split(cl.planMetrics, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		p, err := cat.Plan(names, cl.planMultiplex)
		if err != nil {
			return err
		}
		for i, g := range p.Groups {
			fmt.Fprintf(tw, "group %d (one pass)\t%s\n", i+1, strings.Join(g.Metrics, ", "))
		}
		for _, r := range p.Rejected {
			alt := ""
			if len(r.Alternatives) > 0 {
				alt = " (try " + strings.Join(r.Alternatives, ", ") + ")"
			}
			fmt.Fprintf(tw, "rejected\t%s: %s%s\n", r.Metric, r.Reason, alt)
		}
		// CUPTI 13.2+ names ready-made single-pass sets (pmsample.WithMetricSet); older ones list none.
		sets, err := cat.SinglePassSets()
		if err != nil {
			logger.Warn("single-pass sets unknown", "chip", cat.Chip, "err", err)
		}
		for _, set := range sets {
			fmt.Fprintf(tw, "single-pass set %s\t%s\n", set.Name, strings.Join(set.Metrics, ", "))
		}
	}
	logger.Debug("metric catalog", "chip", cat.Chip)
	return nil
}
