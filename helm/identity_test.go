package helm

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestActivityPeerVerification: the DaemonSet runs in the host's PID namespace so that the
// exporter can verify who connects to its socket (activity.verifyPeers, on by default), and
// the sidecar, whose socket only its own pod reaches, trusts the hello's pod.
func TestActivityPeerVerification(t *testing.T) {
	for _, tc := range []struct {
		values  string
		hostPID bool
	}{
		{"", true},
		{"activity: {verifyPeers: false}", false},
	} {
		out, err := renderWithPod(t, tc.values)
		if err != nil {
			t.Fatal(err)
		}
		ds := decodeStrict(t, manifest{Source: "daemonset.yaml", Kind: "DaemonSet", Name: fullname,
			Body: []byte(out["cupti-exporter/templates/daemonset.yaml"])}).(*appsv1.DaemonSet)
		if got := ds.Spec.Template.Spec.HostPID; got != tc.hostPID {
			t.Errorf("values %q: hostPID %v, want %v", tc.values, got, tc.hostPID)
		}
		if c := container(t, ds.Spec.Template.Spec, "exporter", false); slices.Contains(c.Args, "--activity.trust-hello-pods") {
			t.Errorf("values %q: the node exporter trusts hellos: %s", tc.values, strings.Join(c.Args, " "))
		}
	}
	if c := renderExporter(t, "mode: sidecar"); !slices.Contains(c.Args, "--activity.trust-hello-pods") {
		t.Errorf("the sidecar does not trust its own pod's hellos: %s", strings.Join(c.Args, " "))
	}
}
