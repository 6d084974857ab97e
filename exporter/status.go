package exporter

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Reason codes of cupti_exporter_source_up.
const (
	ReasonNoCUPTI    = "no_cupti"   // libcupti (or the driver) could not be loaded
	ReasonNoGPU      = "no_gpu"     // no CUDA device
	ReasonPrivileges = "privileges" // the profiler needs privileges it does not have
	ReasonBusy       = "busy"       // another profiler holds the counters
	ReasonPaused     = "paused"     // paused through the API
	ReasonDisabled   = "disabled"   // turned off by configuration
	ReasonStarting   = "starting"   // no data yet
	ReasonError      = "error"      // anything else: see /readyz
	ReasonNoSocket   = "no_socket"  // the activity socket file is gone and not re-created yet
)

// ReasonCode is the reason label of a status that is not ready: its Code when set (other
// than "error"), else one recognised in its Reason text, else "error".
func ReasonCode(s Status) string {
	if s.Ready {
		return ""
	}
	if s.Code != "" && s.Code != ReasonError {
		return s.Code
	}
	text := strings.ToLower(s.Reason)
	for _, c := range []struct{ code, words string }{
		{ReasonPrivileges, "privilege|permission|not permitted|rmprofilingadminonly"},
		{ReasonBusy, "busy"},
		{ReasonPaused, "paused"},
		{ReasonDisabled, "disabled"},
		{ReasonNoGPU, "no cuda device|no gpu|no device"},
		{ReasonNoCUPTI, "libcupti|cupti.open|load cupti|libcuda"},
		{ReasonStarting, "waiting|not running|starting"},
	} {
		for _, w := range strings.Split(c.words, "|") {
			if strings.Contains(text, w) {
				return c.code
			}
		}
	}
	return ReasonError
}

// collectStatus emits cupti_exporter_source_up for the statuses of the exporter's reporters.
func (c *collector) collectStatus(ch chan<- prometheus.Metric) { emitStatus(c.e.Status(), ch) }

// statusCollector emits cupti_exporter_source_up (for the self-metrics registry).
type statusCollector struct{ e *Exporter }

func (s statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sourceUpDesc }
func (s statusCollector) Collect(ch chan<- prometheus.Metric) { emitStatus(s.e.Status(), ch) }

func emitStatus(statuses []Status, ch chan<- prometheus.Metric) {
	seen := map[[3]string]bool{}
	for _, s := range statuses {
		key := [3]string{s.Source, s.Device, ReasonCode(s)}
		if seen[key] {
			continue
		}
		seen[key] = true
		up := 0.0
		if s.Ready {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(sourceUpDesc, prometheus.GaugeValue, up, key[:]...)
	}
}

// dropsCollector emits the Prometheus outlet's drop counts (for the self-metrics registry).
type dropsCollector struct{ d *dropCounter }

func (d dropsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- seriesDroppedDesc }
func (d dropsCollector) Collect(ch chan<- prometheus.Metric) { d.d.collect(ch, "prometheus") }
