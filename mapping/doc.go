// Package mapping turns Perfworks metric names (unit__quantity[_qualifiers].rollup[.submetric])
// and their CUPTI properties into Prometheus and OpenTelemetry metric names, units, types, help
// text and labels: the Descs (package snapshot) of the families the PM and GPM sources fill.
//
// ParseName parses a name; a Mapper (New) maps full names through user rules (ParseRules,
// LoadRulesFile), the curated DCGM-comparable table (Mapper.Curated: one series per metric, fed
// on each chip by the first of its candidate Perfworks names that chip offers) or, for everything else,
// derived names; Suggest proposes near names for unknown ones. The naming rules are in
// docs/metric-naming.md.
//
// The package knows nothing of CUPTI or HTTP: it is pure data transformation, fed with metric
// names and properties read elsewhere (a live GPU, a recording, or the GH100 catalog in tests).
// A Mapper is safe for concurrent use; it refuses, at Map, a second metric for a series
// another metric already owns.
package mapping
