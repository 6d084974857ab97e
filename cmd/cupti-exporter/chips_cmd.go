package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pipeline"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
)

const cmdChips = "metrics chips"

// chipsFlags are the arguments of `metrics chips`.
type chipsFlags struct {
	chipSet bool   // --chip was given (metrics' flag, whose default is device 0)
	capture string // folder for the per-chip capture files
}

// addChipsCommand registers `metrics chips` under the metrics command.
func addChipsCommand(metrics *kingpin.CmdClause, c *cli) {
	chips := metrics.Command("chips", "List the chips the installed CUPTI supports and, per chip, the default metric set it resolves to with its pass count (all chips, or --chip's in detail).")
	chips.Flag("capture", "Also write each chip's catalog and pass counts into this folder, as test data for the fake libcupti (testdata/chips).").PlaceHolder("DIR").StringVar(&c.chips.capture)
}

// runChips answers `metrics chips`: every chip CUPTI's host library supports (or --chip's), the
// curated default set resolved for it, and with --capture each chip's capture files.
func runChips(logger *slog.Logger, cfg *pipeline.Config, cl *cli, stdout io.Writer) error {
	lib, err := cupti.Open(cupti.Options{LibraryPath: cfg.CUPTI.Library})
	if err != nil {
		return fmt.Errorf("reading the supported chips: %w", err)
	}
	defer lib.Close()
	var chips []string
	if cl.chips.chipSet {
		chips = []string{cl.metricsChip}
	} else if chips, err = lib.SupportedChips(); err != nil {
		return fmt.Errorf("listing the supported chips: %w", err)
	}
	if cl.chips.capture != "" {
		if err := os.MkdirAll(cl.chips.capture, 0o755); err != nil {
			return err
		}
	}
	m, err := mapping.New()
	if err != nil {
		return err
	}
	header := fmt.Sprintf("cupti-exporter %s, CUPTI API %d (%s), %s", version.Version, lib.Version(), lib.Path(), time.Now().UTC().Format("2006-01-02"))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	detail := len(chips) == 1
	if !detail {
		fmt.Fprintln(tw, "CHIP\tARCHITECTURE\tTRIGGER\tPASSES\tDEFAULT SET\tLEFT OUT")
	}
	var failed []error
	for _, target := range chips {
		start := time.Now()
		set, err := resolveChip(lib, target, m.Curated(), cl.chips.capture, header)
		logger.Debug("chip resolved", "chip", target, "took", time.Since(start))
		if err != nil {
			failed = append(failed, err)
			f := catalog.ChipFacts(target)
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t%v\n", target, f.Architecture, f.Trigger, err)
			continue
		}
		if detail {
			printChipDetail(tw, set)
			continue
		}
		var out []string
		for _, c := range set.Choices {
			if c.Perfworks == "" {
				out = append(out, fmt.Sprintf("%s (%s)", c.Name, c.Missing))
			}
		}
		f := catalog.ChipFacts(set.Chip)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d of %d\t%s\n", set.Chip, f.Architecture, f.Trigger, set.Passes, len(set.Metrics()), len(set.Choices), strings.Join(out, ", "))
	}
	if detail && len(failed) > 0 {
		return failed[0]
	}
	return nil
}

// resolveChip resolves the default set of one chip (a chip name or CUDA ordinal), writing its
// capture into dir when dir is set.
func resolveChip(lib *cupti.Lib, target string, curated []mapping.CuratedMetric, dir, header string) (catalog.DefaultSet, error) {
	cat, err := catalog.Open(lib, target)
	if err != nil {
		return catalog.DefaultSet{Chip: target}, err
	}
	defer cat.Close()
	if dir == "" {
		return cat.DefaultSet(curated)
	}
	c, err := cat.Capture(curated)
	if err != nil {
		return c.Defaults, fmt.Errorf("capturing %s: %w", cat.Chip, err)
	}
	return c.Defaults, catalog.WriteCapture(dir, c, header)
}

func printChipDetail(tw io.Writer, set catalog.DefaultSet) {
	f := catalog.ChipFacts(set.Chip)
	fmt.Fprintf(tw, "chip\t%s (%s: %s)\ntrigger\t%s\npasses\t%d\n", set.Chip, f.Architecture, f.GPUs, f.Trigger, set.Passes)
	fmt.Fprintln(tw, "SERIES\tHEADLINE\tPERFWORKS METRIC")
	for _, c := range set.Choices {
		what := c.Perfworks
		if what == "" {
			what = "left out (" + string(c.Missing) + "): " + c.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, strconv.FormatBool(c.Headline), what)
	}
}
