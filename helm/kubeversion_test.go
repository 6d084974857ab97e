package helm

import (
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
)

// TestKubeVersion checks Chart.yaml's kubeVersion with the function helm install and helm
// template use to refuse a cluster (chartutil.IsCompatibleRange, called by the Helm SDK's
// action.renderResources; its action package would add about 40 modules to go.mod for this
// one test): Kubernetes 1.28, whose native sidecars (sidecar mode, the webhook's sidecar
// wiring) are off by default, is refused; 1.29 and later are accepted, with a managed
// cluster's version suffix too.
func TestKubeVersion(t *testing.T) {
	c := loadChart(t)
	if c.Metadata.KubeVersion == "" {
		t.Fatal("Chart.yaml has no kubeVersion")
	}
	for _, tc := range []struct {
		version string
		ok      bool
	}{
		{"v1.27.9", false},
		{"v1.28.15", false},
		{"v1.28.15-eks-1234567", false},
		{"v1.29.0", true},
		{"v1.29.3-eks-adc7111", true},
		{"v1.31.1-gke.1678000", true},
		{"v1.35.0", true},
	} {
		kv, err := chartutil.ParseKubeVersion(tc.version)
		if err != nil {
			t.Fatal(err)
		}
		// What action.renderResources compares: the capabilities' KubeVersion.String().
		if got := chartutil.IsCompatibleRange(c.Metadata.KubeVersion, kv.String()); got != tc.ok {
			t.Errorf("kubeVersion %q with Kubernetes %s: compatible %v; want %v", c.Metadata.KubeVersion, tc.version, got, tc.ok)
		}
	}
}
