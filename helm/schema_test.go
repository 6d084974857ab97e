package helm

import (
	"strings"
	"testing"
)

// TestSchemaRejectsInvalidValues checks that values.schema.json refuses mistakes with a
// message naming the offending key, before anything renders.
func TestSchemaRejectsInvalidValues(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		values string
		want   []string // substrings of the error
	}{
		{"mode: daemonset", []string{"/mode", "node", "sidecar"}},
		{"modee: node", []string{"modee"}},                                 // unknown top-level key
		{"pmsample: {intervall: 1ms}", []string{"/pmsample", "intervall"}}, // typo in a nested key
		{"pmsample: {interval: 1 ms}", []string{"/pmsample/interval"}},
		{"pmsample: {interval: 1}", []string{"/pmsample/interval", "string"}},
		{"pmsample: {metrics: [sm_active]}", []string{"/pmsample/metrics/0"}},
		{"pmsample: {cupti: {hostDir: usr/local/cuda}}", []string{"/pmsample/cupti/hostDir"}}, // not absolute
		{"pmsample: {cupti: {path: /x}}", []string{"/pmsample/cupti", "path"}},
		{"profiling: {requireCapSysAdmin: \"yes\"}", []string{"/profiling/requireCapSysAdmin", "boolean"}},
		{"image: {pullPolicy: Sometimes}", []string{"/image/pullPolicy"}},
		{"web: {port: 70000}", []string{"/web/port"}},
		{"injection: {hostDir: run/cupti}", []string{"/injection/hostDir"}},
		{"injection: {kinds: kernels}", []string{"/injection/kinds"}},
		{"tolerations: [{key: a, operator: Maybe}]", []string{"/tolerations/0/operator"}},
		{"serviceMonitor: {interval: 15 seconds}", []string{"/serviceMonitor/interval"}},
		{"prometheusRule: {idleGPU: {threshold: 2}}", []string{"/prometheusRule/idleGPU/threshold"}},
		{"runtimeClassName: NVIDIA", []string{"/runtimeClassName"}},
		{"extraArgs: [log.level=debug]", []string{"/extraArgs/0"}},
	} {
		_, err := renderYAML(t, c, tc.values)
		if err == nil {
			t.Errorf("values %q: accepted; want a schema error", tc.values)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "values don't meet the specifications of the schema") {
			t.Errorf("values %q: error is not from the schema: %v", tc.values, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("values %q: error does not mention %q:\n%v", tc.values, w, err)
			}
		}
	}
}

func TestSchemaAcceptsDocumentedValues(t *testing.T) {
	c := loadChart(t)
	for _, values := range []string{
		"",
		nodeCustom,
		"mode: sidecar",
		"pmsample: {interval: 100us, metrics: []}",
		"runtimeClassName: nvidia",
		"image: {digest: sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef}",
	} {
		if _, err := renderYAML(t, c, values); err != nil {
			t.Errorf("values %q: %v", values, err)
		}
	}
}
