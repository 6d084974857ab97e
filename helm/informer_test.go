package helm

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// informerArg returns the container's --kubernetes.pod-informer flags.
func informerArg(c corev1.Container) []string {
	var out []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--kubernetes.pod-informer") {
			out = append(out, a)
		}
	}
	return out
}

// TestPodInformerFlag checks that the chart never leaves the informer on auto: "on" exactly
// where it renders the RBAC, the token and NODE_NAME, "off" everywhere else (an auto
// informer without RBAC would only log forbidden watch errors).
func TestPodInformerFlag(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         string
	}{
		{"node defaults", "", "--kubernetes.pod-informer=on"},
		{"node, informer disabled", "kubernetes: {podInformer: {enabled: false}, resourceSlices: {enabled: false}}", "--kubernetes.pod-informer=off"},
		{"node, existing service account", "serviceAccount: {create: false, name: gpu}", "--kubernetes.pod-informer=on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, _ := render(t, tc.values)
			objs := decodeAll(t, ms)
			spec := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec
			exp := container(t, spec, "exporter", false)
			if got := informerArg(exp); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("informer flags %q; want exactly [%s]", got, tc.want)
			}
			_, rbac := objs["ClusterRole/"+clusterName]
			token := spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken
			if on := tc.want == "--kubernetes.pod-informer=on"; on {
				checkPodInformerRBAC(t, objs, spec)
				if !token {
					t.Error("informer on without the service account token")
				}
			} else if rbac || token {
				t.Errorf("informer off but ClusterRole rendered %v, token mounted %v", rbac, token)
			}
		})
	}

	t.Run("sidecar", func(t *testing.T) {
		// Even with the informer value left true: a sidecar only serves its own pod.
		out, err := renderWithPod(t, "mode: sidecar\nkubernetes: {podInformer: {enabled: true}}")
		if err != nil {
			t.Fatal(err)
		}
		pod := decodeStrict(t, manifest{Source: "zz-test-pod.yaml", Kind: "Pod", Name: "trainer", Body: []byte(out["cupti-exporter/templates/zz-test-pod.yaml"])}).(*corev1.Pod)
		exp := container(t, pod.Spec, "cupti-exporter", true)
		if got := informerArg(exp); len(got) != 1 || got[0] != "--kubernetes.pod-informer=off" {
			t.Errorf("sidecar informer flags %q; want exactly [--kubernetes.pod-informer=off]", got)
		}
		for _, f := range out {
			if strings.Contains(f, "kind: ClusterRole") {
				t.Error("sidecar mode rendered a ClusterRole")
			}
		}
	})
}

// checkWorkloadNamesPod checks that the workload container has POD_NAME and POD_NAMESPACE
// from the downward API (the injection library's hello carries them, which labels the
// sidecar's series) and no CONTAINER_NAME of the template's own (the caller's choice).
func checkWorkloadNamesPod(t *testing.T, c corev1.Container) {
	t.Helper()
	for name, path := range map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"} {
		found := false
		for _, e := range c.Env {
			if e.Name != name {
				continue
			}
			if found {
				t.Errorf("workload container %s: %s set twice", c.Name, name)
			}
			found = true
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != path {
				t.Errorf("workload container %s: %s = %+v; want fieldRef %s", c.Name, name, e, path)
			}
		}
		if !found {
			t.Errorf("workload container %s: no %s; the hello would name no pod", c.Name, name)
		}
	}
	if _, ok := envValue(c, "CONTAINER_NAME"); ok {
		t.Errorf("workload container %s: the template sets CONTAINER_NAME; it cannot know the name", c.Name)
	}
}
