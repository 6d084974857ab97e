// Package dashboards holds the Grafana dashboards (*.json) for cupti-exporter and, in its
// tests only, the code that generates them with the Grafana Foundation SDK and checks
// them: strict decoding and validation with the SDK, every PromQL expression (panels,
// variables, and the Helm chart's alert rules) parsed with the Prometheus parser, and
// every metric name they use compared with metric-names.txt and with the names the
// exporter really emits (e2e/testdata/demo-metric-names.txt).
//
//	go test ./dashboards/             # check
//	go test ./dashboards/ -update     # regenerate *.json and metric-names.txt
package dashboards
