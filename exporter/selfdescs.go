package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// selfNamespace prefixes the exporter's own families, those of its HTTP listeners too.
const selfNamespace = "cupti_exporter"

// selfDescs are the exporter's own families, served by its self-metrics registry: each is
// declared once here, for its Prometheus descriptor and its OTLP name (SelfOTelName).
var selfDescs = snapshot.NewTable()

var (
	// cupti_exporter_source_up: a short reason code as label value; the full text of
	// Status.Reason goes to /readyz and the log, never into a label.
	sourceUpDesc = selfDesc(selfDescs.Gauge("cupti_exporter_source_up", "", "cupti.exporter.source.up", "1",
		"Whether a source is producing data on a GPU (1) or not (0, with a short reason code: no_cupti, no_gpu, privileges, busy, paused, disabled, starting, no_socket, error; /readyz and the log give the full text).",
		"source", "gpu", "reason"))
	collectDurationDesc = selfDesc(selfDescs.Gauge("cupti_exporter_collect_duration_seconds", "seconds", "cupti.exporter.collect.duration", "s",
		"Time the snapshot collector took to emit the latest snapshots of all sources."))
	seriesDroppedDesc = selfDesc(selfDescs.Counter("cupti_exporter_series_dropped_total", "", "cupti.exporter.series.dropped", "{series}",
		"Series not exported because their family conflicts with another of the same name, their label set repeats, their values are invalid, or their family passed the series limit (cardinality).",
		"outlet", "reason"))
	otlpExportsDesc = selfDesc(selfDescs.Counter("cupti_exporter_otlp_exports_total", "", "cupti.exporter.otlp.exports", "{export}",
		"OTLP exports attempted, by result (success or failure).", "result"))
	// cupti_exporter_scrapes_refused_total: refusals counts them.
	scrapesRefusedDesc = selfDesc(selfDescs.Counter("cupti_exporter_scrapes_refused_total", "", "cupti.exporter.scrapes.refused", "{scrape}",
		"Scrapes answered 503 by reason: max_requests (--web.max-requests already waiting or running), "+
			"render_wait (other distinct responses, by format, compression or name[] filter, held the render slot for 2 s), "+
			"filtered (2 requests with a name[] filter already waiting or running).",
		"reason"))
)

// selfDesc is d as the self-metrics registry describes it: without unit metadata (unlike
// promDesc of the sources' families), as these families have always been served.
func selfDesc(d *snapshot.Desc) *prometheus.Desc {
	return prometheus.NewDesc(d.Name, d.Help, d.LabelNames, nil)
}
