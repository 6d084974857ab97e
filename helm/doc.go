// Package helm holds no code: its tests render the chart in cupti-exporter/ with the Helm
// Go SDK in node and sidecar mode and as the dependency of a parent chart
// (testdata/parent), lint it, decode every manifest strictly into the Kubernetes API
// types and typed prometheus-operator types (crd_types_test.go: unknown fields in
// tlsConfig, basicAuth, authorization or relabelings fail), check the values schema,
// parse every PromQL expression of the alert rules, and scrape with Prometheus' own
// scrape code configured as prometheus-operator configures the chart's monitors
// (honorlabels_test.go).
//
//	go test ./helm/
package helm
