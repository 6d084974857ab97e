package helm

import (
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// wantAPIVersion is the apiVersion each kind must be rendered with.
var wantAPIVersion = map[string]string{
	"DaemonSet":                    "apps/v1",
	"Service":                      "v1",
	"ServiceAccount":               "v1",
	"ConfigMap":                    "v1",
	"ServiceMonitor":               "monitoring.coreos.com/v1",
	"PodMonitor":                   "monitoring.coreos.com/v1",
	"PrometheusRule":               "monitoring.coreos.com/v1",
	"Pod":                          "v1",
	"Job":                          "batch/v1",
	"ClusterRole":                  "rbac.authorization.k8s.io/v1",
	"ClusterRoleBinding":           "rbac.authorization.k8s.io/v1",
	"Role":                         "rbac.authorization.k8s.io/v1",
	"RoleBinding":                  "rbac.authorization.k8s.io/v1",
	"Deployment":                   "apps/v1",
	"Secret":                       "v1",
	"PodDisruptionBudget":          "policy/v1",
	"MutatingWebhookConfiguration": "admissionregistration.k8s.io/v1",
	"Issuer":                       "cert-manager.io/v1",
	"Certificate":                  "cert-manager.io/v1",
}

// clusterScoped kinds have no namespace.
var clusterScoped = map[string]bool{"ClusterRole": true, "ClusterRoleBinding": true, "MutatingWebhookConfiguration": true}

// decodeStrict decodes m into the Go type of its kind, rejecting unknown and duplicate
// fields, and checks apiVersion, namespace and the standard labels.
func decodeStrict(t *testing.T, m manifest) any {
	t.Helper()
	var obj any
	switch m.Kind {
	case "DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "Service":
		obj = &corev1.Service{}
	case "ServiceAccount":
		obj = &corev1.ServiceAccount{}
	case "ConfigMap":
		obj = &corev1.ConfigMap{}
	case "Pod":
		obj = &corev1.Pod{}
	case "Job":
		obj = &batchv1.Job{}
	case "ServiceMonitor":
		obj = &serviceMonitor{}
	case "PodMonitor":
		obj = &podMonitor{}
	case "PrometheusRule":
		obj = &prometheusRule{}
	case "ClusterRole":
		obj = &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		obj = &rbacv1.ClusterRoleBinding{}
	case "Role":
		obj = &rbacv1.Role{}
	case "RoleBinding":
		obj = &rbacv1.RoleBinding{}
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "Secret":
		obj = &corev1.Secret{}
	case "PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "MutatingWebhookConfiguration":
		obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
	case "Issuer":
		obj = &certManagerIssuer{}
	case "Certificate":
		obj = &certManagerCertificate{}
	default:
		t.Fatalf("%s: kind %q has no strict decoder in this test; add one", m, m.Kind)
	}
	if err := yaml.UnmarshalStrict(m.Body, obj); err != nil {
		t.Fatalf("%s: strict decode: %v\n%s", m, err, numbered(string(m.Body)))
	}
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		checkPodSpec(t, m, o.Spec.Template.Spec)
	case *appsv1.Deployment:
		checkPodSpec(t, m, o.Spec.Template.Spec)
	case *corev1.Pod:
		checkPodSpec(t, m, o.Spec)
	case *batchv1.Job:
		checkPodSpec(t, m, o.Spec.Template.Spec)
	}
	tm, om := meta(obj)
	if tm.APIVersion != wantAPIVersion[m.Kind] {
		t.Errorf("%s: apiVersion %q; want %q", m, tm.APIVersion, wantAPIVersion[m.Kind])
	}
	if errs := validation.IsDNS1123Subdomain(om.Name); len(errs) > 0 {
		t.Errorf("%s: invalid name %q: %v", m, om.Name, errs)
	}
	if m.Kind != "Pod" && m.Kind != "Job" { // workload fixtures of the tests carry their own labels
		if clusterScoped[m.Kind] {
			if om.Namespace != "" {
				t.Errorf("%s: cluster-scoped object with namespace %q", m, om.Namespace)
			}
		} else if om.Namespace != namespace {
			t.Errorf("%s: namespace %q; want the release namespace %q", m, om.Namespace, namespace)
		}
		if om.Labels["app.kubernetes.io/instance"] != releaseName || om.Labels["app.kubernetes.io/name"] != "cupti-exporter" {
			t.Errorf("%s: missing standard labels: %v", m, om.Labels)
		}
	}
	for k, v := range om.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%s: label key %q: %v", m, k, errs)
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s: label %s=%q: %v", m, k, v, errs)
		}
	}
	return obj
}

func meta(obj any) (metav1.TypeMeta, metav1.ObjectMeta) {
	switch o := obj.(type) {
	case *appsv1.DaemonSet:
		return o.TypeMeta, o.ObjectMeta
	case *corev1.Service:
		return o.TypeMeta, o.ObjectMeta
	case *corev1.ServiceAccount:
		return o.TypeMeta, o.ObjectMeta
	case *corev1.ConfigMap:
		return o.TypeMeta, o.ObjectMeta
	case *corev1.Pod:
		return o.TypeMeta, o.ObjectMeta
	case *batchv1.Job:
		return o.TypeMeta, o.ObjectMeta
	case *serviceMonitor:
		return o.TypeMeta, o.ObjectMeta
	case *podMonitor:
		return o.TypeMeta, o.ObjectMeta
	case *prometheusRule:
		return o.TypeMeta, o.ObjectMeta
	case *rbacv1.ClusterRole:
		return o.TypeMeta, o.ObjectMeta
	case *rbacv1.ClusterRoleBinding:
		return o.TypeMeta, o.ObjectMeta
	case *rbacv1.Role:
		return o.TypeMeta, o.ObjectMeta
	case *rbacv1.RoleBinding:
		return o.TypeMeta, o.ObjectMeta
	case *appsv1.Deployment:
		return o.TypeMeta, o.ObjectMeta
	case *corev1.Secret:
		return o.TypeMeta, o.ObjectMeta
	case *policyv1.PodDisruptionBudget:
		return o.TypeMeta, o.ObjectMeta
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return o.TypeMeta, o.ObjectMeta
	case *certManagerIssuer:
		return o.TypeMeta, o.ObjectMeta
	case *certManagerCertificate:
		return o.TypeMeta, o.ObjectMeta
	}
	panic(fmt.Sprintf("meta: unexpected %T", obj))
}

// decodeAll decodes every manifest strictly and fails on two objects of one kind and name.
func decodeAll(t *testing.T, ms []manifest) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, m := range ms {
		obj := decodeStrict(t, m)
		key := m.Kind + "/" + m.Name
		if _, dup := out[key]; dup {
			t.Errorf("%s rendered twice", key)
		}
		out[key] = obj
	}
	return out
}

func TestStrictDecoderRejectsUnknownFields(t *testing.T) {
	// Guards the guard: a misplaced field must fail the decode used above.
	doc := []byte("apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: x\nspec:\n  template:\n    spec:\n      containers:\n        - name: a\n          imagePullPolicy: Always\n          runtimeClassName: nvidia\n")
	if err := yaml.UnmarshalStrict(doc, &appsv1.DaemonSet{}); err == nil {
		t.Fatal("strict decode accepted runtimeClassName on a container")
	}
	doc = []byte("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n  selector: {}\n  endpoints:\n    - port: metrics\n      intervall: 15s\n")
	if err := yaml.UnmarshalStrict(doc, &serviceMonitor{}); err == nil {
		t.Fatal("strict decode accepted a misspelt endpoint field")
	}
	// The pass-through scrape options are typed too: a misplaced key in tlsConfig,
	// basicAuth, authorization or a relabeling fails, and PodMonitors refuse the file
	// fields of TLSConfig (prometheus-operator's SafeTLSConfig has none).
	for _, bad := range []struct {
		obj  any
		kind string
		ep   string
	}{
		{&serviceMonitor{}, "ServiceMonitor", "tlsConfig: {ca: {secret: {name: a, key: b}}, server_name: x}"},
		{&serviceMonitor{}, "ServiceMonitor", "tlsConfig: {ca: {secretName: a}}"},
		{&serviceMonitor{}, "ServiceMonitor", "basicAuth: {username: {name: a, key: u}, password: {name: a, key: p}, user: x}"},
		{&serviceMonitor{}, "ServiceMonitor", "authorization: {type: Bearer, credentials: {name: a, key: t}, token: x}"},
		{&serviceMonitor{}, "ServiceMonitor", "relabelings: [{source_labels: [a], targetLabel: b}]"},
		{&serviceMonitor{}, "ServiceMonitor", "metricRelabelings: [{sourceLabels: [a], action: drop, regexp: x}]"},
		{&podMonitor{}, "PodMonitor", "tlsConfig: {caFile: /etc/ca.crt}"},
	} {
		list := "endpoints"
		if bad.kind == "PodMonitor" {
			list = "podMetricsEndpoints"
		}
		doc := []byte("apiVersion: monitoring.coreos.com/v1\nkind: " + bad.kind + "\nmetadata:\n  name: x\nspec:\n  selector: {}\n  " + list + ":\n    - port: metrics\n      " + bad.ep + "\n")
		if err := yaml.UnmarshalStrict(doc, bad.obj); err == nil {
			t.Errorf("strict decode of a %s accepted %s", bad.kind, bad.ep)
		}
	}
	good := []byte("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: x\nspec:\n  selector: {}\n  endpoints:\n    - port: metrics\n      tlsConfig: {ca: {secret: {name: a, key: b}}, caFile: /x, serverName: s, insecureSkipVerify: false}\n      basicAuth: {username: {name: a, key: u}, password: {name: a, key: p}}\n")
	if err := yaml.UnmarshalStrict(good, &serviceMonitor{}); err != nil {
		t.Errorf("strict decode refused a valid endpoint: %v", err)
	}
}

// checkPodSpec checks what the API server would refuse and a strict decode cannot see:
// unique container names, mounts of declared volumes, valid port names, probes on
// declared ports.
func checkPodSpec(t *testing.T, m manifest, spec corev1.PodSpec) {
	t.Helper()
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		if volumes[v.Name] {
			t.Errorf("%s: volume %s declared twice", m, v.Name)
		}
		volumes[v.Name] = true
	}
	names := map[string]bool{}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if names[c.Name] {
			t.Errorf("%s: container name %s used twice", m, c.Name)
		}
		names[c.Name] = true
		if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
			t.Errorf("%s: container name %q: %v", m, c.Name, errs)
		}
		ports := map[string]bool{}
		for _, p := range c.Ports {
			if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
				t.Errorf("%s: container %s: port name %q: %v", m, c.Name, p.Name, errs)
			}
			ports[p.Name] = true
		}
		for _, vm := range c.VolumeMounts {
			if !volumes[vm.Name] {
				t.Errorf("%s: container %s mounts undeclared volume %s", m, c.Name, vm.Name)
			}
		}
		for _, pr := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
			if pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.StrVal != "" && !ports[pr.HTTPGet.Port.StrVal] {
				t.Errorf("%s: container %s probes undeclared port %s", m, c.Name, pr.HTTPGet.Port.StrVal)
			}
		}
	}
}
