package catalog

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// A chip capture is what the fake libcupti (internal/cupti/fake) needs to answer for one chip
// as the real library did: the catalog and the pass counts the default set's resolution asked
// for. `metrics chips --capture DIR` writes two files per chip:
//
//	CHIP.tsv.gz  every base metric: type<TAB>name<TAB>hw unit<TAB>dim unit (as testdata/gh100_*.tsv)
//	CHIP.passes  text, one fact a line, tab-separated, metrics by number:
//	  name  I  FULLNAME              metric I (from 0) of the lines below
//	  passes  N|eCODE  I,J,...       GetNumOfPasses of the set (eCODE: the CUptiResult that refused it)
//	  sublist  K  s1,s2,...          a list of submetrics (no leading dot)
//	  submetrics  BASE  K            the submetrics of a candidate's base
//	  resolved  N  I,J,...           the resolved default set and its pass count
//	  missing  SERIES  REASON        a curated metric left out (REASON: a MissingReason)

// PassQuery is one GetNumOfPasses answer.
type PassQuery struct {
	Metrics []string
	Passes  int
	Result  int // the CUptiResult that refused the set; 0 when Passes is valid
}

// ChipCapture is one chip's capture.
type ChipCapture struct {
	Chip       string
	Catalog    []MetricInfo
	Queries    []PassQuery
	SubMetrics map[string][]string // by base, for the candidates' bases
	Defaults   DefaultSet
}

// passRecorder is a MetricHost that logs every pass count it answers.
type passRecorder struct {
	MetricHost
	log  []PassQuery
	seen map[string]bool
}

func (r *passRecorder) Passes(ms []string) (int, error) {
	n, err := r.MetricHost.Passes(ms)
	key := strings.Join(ms, ",")
	if r.seen[key] {
		return n, err
	}
	r.seen[key] = true
	q := PassQuery{Metrics: slices.Clone(ms), Passes: n}
	if err != nil {
		q.Passes, q.Result = 0, int(cupti.ErrorUnknown)
		var ce *cupti.CallError
		if errors.As(err, &ce) {
			q.Result = int(ce.Result)
		}
	}
	r.log = append(r.log, q)
	return n, err
}

// Capture resolves the default set while recording every pass count CUPTI gives, adds the
// pass count of every candidate present alone, and reads the whole catalog.
func (c *Catalog) Capture(curated []mapping.CuratedMetric) (ChipCapture, error) {
	rec := &passRecorder{MetricHost: c.p.host, seen: map[string]bool{}}
	p := &Planner{host: rec, bases: c.p.bases}
	out := ChipCapture{Chip: c.Chip, SubMetrics: map[string][]string{}}
	set, err := p.resolveDefaults(c.Chip, curated)
	if err != nil {
		return out, err
	}
	out.Defaults = set
	for _, m := range curated {
		for _, name := range m.For(c.Chip) {
			base, _ := splitName(name)
			b, ok := p.base(base)
			if !ok {
				continue
			}
			if _, done := out.SubMetrics[base]; !done {
				subs, err := p.host.SubMetrics(b)
				if err != nil {
					return out, fmt.Errorf("reading submetrics of %s: %w", base, err)
				}
				out.SubMetrics[base] = subs
			}
			if p.inCatalog(name) {
				_, _ = p.host.Passes([]string{name}) // recorded, refusals included
			}
		}
	}
	out.Queries = rec.log
	if out.Catalog, err = list(p); err != nil {
		return out, err
	}
	return out, nil
}

// WriteCapture writes CHIP.tsv.gz and CHIP.passes into dir.
func WriteCapture(dir string, c ChipCapture, header string) error {
	if err := writeCatalogGz(filepath.Join(dir, c.Chip+".tsv.gz"), c, header); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, c.Chip+".passes"))
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "# %s\n# chip %s: pass counts from cuptiProfilerHostGetNumOfPasses (format: pmsample/catalog/capture.go)\n", header, c.Chip)
	ids := map[string]int{}
	list := func(ms []string) string {
		out := make([]string, len(ms))
		for i, m := range ms {
			id, ok := ids[m]
			if !ok {
				id = len(ids)
				ids[m] = id
				fmt.Fprintf(w, "name\t%d\t%s\n", id, m)
			}
			out[i] = strconv.Itoa(id)
		}
		return strings.Join(out, ",")
	}
	for _, q := range c.Queries {
		n := strconv.Itoa(q.Passes)
		if q.Result != 0 {
			n = "e" + strconv.Itoa(q.Result)
		}
		l := list(q.Metrics)
		fmt.Fprintf(w, "passes\t%s\t%s\n", n, l)
	}
	bases := make([]string, 0, len(c.SubMetrics))
	for b := range c.SubMetrics {
		bases = append(bases, b)
	}
	slices.Sort(bases)
	sublists := map[string]int{}
	for _, b := range bases {
		l := strings.Join(c.SubMetrics[b], ",")
		k, ok := sublists[l]
		if !ok {
			k = len(sublists)
			sublists[l] = k
			fmt.Fprintf(w, "sublist\t%d\t%s\n", k, l)
		}
		fmt.Fprintf(w, "submetrics\t%s\t%d\n", b, k)
	}
	l := list(c.Defaults.Metrics())
	fmt.Fprintf(w, "resolved\t%d\t%s\n", c.Defaults.Passes, l)
	for _, ch := range c.Defaults.Choices {
		if ch.Perfworks == "" {
			fmt.Fprintf(w, "missing\t%s\t%s\n", ch.Name, ch.Missing)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeCatalogGz(path string, c ChipCapture, header string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	w := bufio.NewWriter(zw)
	fmt.Fprintf(w, "# %s\n# chip %s: PM-sampling base metrics (cuptiProfilerHostGetBaseMetrics + GetMetricProperties)\n", header, c.Chip)
	fmt.Fprintf(w, "# columns: metric_type<TAB>base_metric<TAB>hw_unit<TAB>dim_unit\n")
	for _, m := range c.Catalog {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", m.Type, m.Name, m.HWUnit, m.DimUnit)
	}
	err = errors.Join(w.Flush(), zw.Close())
	return errors.Join(err, f.Close())
}

// ReadCaptureFacts reads the lines of a CHIP.passes file whose first field is kind (passes,
// submetrics, resolved, missing), split at tabs, with metric numbers replaced by names, for
// tests and tools. Lines are at most 1 MiB.
func ReadCaptureFacts(r io.Reader, kind string) ([][]string, error) {
	var out [][]string
	names := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if f[0] == "name" && len(f) == 3 {
			names[f[1]] = f[2]
		}
		if f[0] != kind {
			continue
		}
		if (kind == "passes" || kind == "resolved") && len(f) == 3 {
			ids := strings.Split(f[2], ",")
			for i, id := range ids {
				n, ok := names[id]
				if !ok {
					return nil, fmt.Errorf("capture: metric number %q undefined", id)
				}
				ids[i] = n
			}
			f[2] = strings.Join(ids, ",")
		}
		out = append(out, f)
	}
	return out, sc.Err()
}
