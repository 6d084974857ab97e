package snapshot

import "slices"

// Table is one package's metric descriptors, each declared once: Add keeps it and returns it
// to the code that fills it, Descs lists them. Tables are made and filled in package-level
// variables (at program initialisation, one goroutine), and read only afterwards.
type Table struct{ descs []*Desc }

// tables are every Table NewTable made, in the order the packages were initialised.
var tables []*Table

// NewTable returns an empty table that Declared lists.
func NewTable() *Table {
	t := &Table{}
	tables = append(tables, t)
	return t
}

// Add keeps d in the table and returns it.
func (t *Table) Add(d *Desc) *Desc {
	t.descs = append(t.descs, d)
	return d
}

// Descs lists the table's descriptors in the order they were added.
func (t *Table) Descs() []*Desc { return slices.Clone(t.descs) }

// Declared lists the descriptors of every table of the program's packages, table by table:
// every fixed family a source can emit, for the metrics reference and name checks. (Families
// made at run time, such as those mapped from Perfworks names, are in no table.)
func Declared() []*Desc {
	var out []*Desc
	for _, t := range tables {
		out = append(out, t.descs...)
	}
	return out
}

// Gauge adds a gauge: its Prometheus name and unit suffix ("" for none), OpenTelemetry name
// and UCUM unit, help and label names.
func (t *Table) Gauge(name, unit, otelName, otelUnit, help string, labels ...string) *Desc {
	return t.add(KindGauge, name, unit, otelName, otelUnit, help, labels)
}

// Counter adds a counter (a name ending in _total), as Gauge.
func (t *Table) Counter(name, unit, otelName, otelUnit, help string, labels ...string) *Desc {
	return t.add(KindCounter, name, unit, otelName, otelUnit, help, labels)
}

// Histogram adds a histogram, as Gauge.
func (t *Table) Histogram(name, unit, otelName, otelUnit, help string, labels ...string) *Desc {
	return t.add(KindHistogram, name, unit, otelName, otelUnit, help, labels)
}

func (t *Table) add(k Kind, name, unit, otelName, otelUnit, help string, labels []string) *Desc {
	return t.Add(&Desc{Name: name, Help: help, Kind: k, Unit: unit, OTelName: otelName, OTelUnit: otelUnit, LabelNames: labels})
}
