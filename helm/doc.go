// Package helm holds no code: its tests render the chart in cupti-exporter/ with the Helm
// Go SDK in node and sidecar mode, lint it, decode every manifest strictly into the
// Kubernetes API types (and minimal prometheus-operator types), check the values schema
// and parse every PromQL expression of the alert rules.
//
//	go test ./helm/
package helm
