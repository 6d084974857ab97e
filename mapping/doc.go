// Package mapping turns Perfworks metric names (unit__quantity[_qualifiers].rollup[.submetric])
// and their CUPTI properties into Prometheus and OpenTelemetry metric names, units, types, help
// text and labels, and holds the snapshot model (Desc, Family, Snapshot) that sources fill and
// the exporter serves.
//
// The package knows nothing of CUPTI or HTTP: it is pure data transformation, fed with metric
// names and properties read elsewhere (a live GPU, a recording, or the GH100 catalog in tests).
package mapping
