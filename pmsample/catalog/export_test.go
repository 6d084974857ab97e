package catalog

import "github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

// The external tests (package catalog_test) read the host through these.

func (c *Catalog) Passes(metrics []string) (int, error)              { return c.hc.Passes(metrics) }
func (c *Catalog) Properties(name string) (pmdata.Properties, error) { return c.hc.Properties(name) }
func (c *Catalog) BaseNames() []string                               { return c.p.baseNames() }

var SeriesLabel = seriesLabel
