package exporter

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// promDesc is the client_golang descriptor of a family. It carries the family's unit, which
// OpenMetrics output writes as "# UNIT", when the name ends in it (before _total), as
// OpenMetrics requires and Prometheus's parser checks; otherwise no unit.
func promDesc(d *snapshot.Desc) *prometheus.Desc {
	var opts []prometheus.DescOpt
	if u := d.Unit; u != "" && strings.HasSuffix(strings.TrimSuffix(d.Name, "_total"), "_"+u) {
		opts = append(opts, prometheus.WithUnit(u))
	}
	return prometheus.V2.NewDesc(d.Name, d.Help, prometheus.UnconstrainedLabels(d.LabelNames), nil, opts...)
}
