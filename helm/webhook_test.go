package helm

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cupti-exporter/cupti-exporter/webhook"
)

var updateWiring = flag.Bool("update-wiring", false, "rewrite webhook/testdata/wiring.yaml from the chart")

const (
	webhookName   = fullname + "-webhook"
	webhookConfig = fullname + "-" + namespace + "-webhook"
	// wiringFixture is the chart's wiring at default values; the webhook's unit tests use it.
	wiringFixture = "../webhook/testdata/wiring.yaml"
)

func TestWebhookOffByDefault(t *testing.T) {
	ms, _ := render(t, "")
	for _, m := range ms {
		if strings.Contains(m.Name, "webhook") || m.Kind == "MutatingWebhookConfiguration" || m.Kind == "Deployment" {
			t.Errorf("webhook.enabled is false but %s was rendered", m)
		}
	}
}

// TestWebhookChart: two replicas, a Service the MutatingWebhookConfiguration names, a
// registration that can never block a pod, flags naming the objects the chart creates, and
// RBAC limited to them.
func TestWebhookChart(t *testing.T) {
	ms, _ := render(t, "webhook: {enabled: true}")
	objs := decodeAll(t, ms)
	dep := objs["Deployment/"+webhookName].(*appsv1.Deployment)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("replicas %v; want 2", dep.Spec.Replicas)
	}
	spec := dep.Spec.Template.Spec
	c := container(t, spec, "webhook", false)
	wantArgs(t, c, "webhook", "--webhook.listen-address=:9443", "--webhook.health-listen-address=:9479",
		"--webhook.wiring-file=/etc/cupti-exporter/webhook/wiring.yaml",
		"--webhook.gpu-resources=nvidia.com/gpu,nvidia.com/gpu.shared,nvidia.com/mig-*",
		"--webhook.own-label=app.kubernetes.io/name=cupti-exporter",
		"--webhook.tls.secret="+webhookName+"-tls",
		"--webhook.tls.dns-names="+webhookName+"."+namespace+".svc",
		"--webhook.configuration="+webhookConfig)
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		t.Error("the webhook must run as non-root")
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the webhook's root filesystem must be read-only")
	}
	if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken || spec.ServiceAccountName != webhookName {
		t.Errorf("service account %q, token %v", spec.ServiceAccountName, spec.AutomountServiceAccountToken)
	}
	if cm := volume(spec, "wiring"); cm == nil || cm.ConfigMap == nil || cm.ConfigMap.Name != webhookName {
		t.Errorf("wiring volume %+v", cm)
	}

	svc := objs["Service/"+webhookName].(*corev1.Service)
	for k, v := range svc.Spec.Selector {
		if dep.Spec.Template.Labels[k] != v {
			t.Errorf("Service selects %s=%s, which the webhook pods lack", k, v)
		}
	}
	if svc.Spec.Selector["app.kubernetes.io/component"] != "webhook" {
		t.Errorf("Service selector %v would also select the exporter's pods", svc.Spec.Selector)
	}

	mwc := objs["MutatingWebhookConfiguration/"+webhookConfig].(*admissionregistrationv1.MutatingWebhookConfiguration)
	if len(mwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks; want 1", len(mwc.Webhooks))
	}
	w := mwc.Webhooks[0]
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.TimeoutSeconds != 2 || *w.SideEffects != admissionregistrationv1.SideEffectClassNone ||
		*w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
		t.Errorf("failurePolicy %s, timeout %d, sideEffects %s, reinvocation %s", *w.FailurePolicy, *w.TimeoutSeconds, *w.SideEffects, *w.ReinvocationPolicy)
	}
	ref := w.ClientConfig.Service
	if ref == nil || ref.Name != svc.Name || ref.Namespace != namespace || *ref.Path != webhook.MutatePath || *ref.Port != svc.Spec.Ports[0].Port {
		t.Errorf("clientConfig.service %+v does not name the Service %s port %d", ref, svc.Name, svc.Spec.Ports[0].Port)
	}
	if svc.Spec.Ports[0].TargetPort.StrVal != "https" || c.Ports[0].Name != "https" || c.Ports[0].ContainerPort != 9443 {
		t.Errorf("Service targets %v; container ports %v", svc.Spec.Ports[0].TargetPort, c.Ports)
	}
	if len(w.ClientConfig.CABundle) != 0 {
		t.Error("the chart must leave caBundle to the webhook")
	}
	if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Resources, []string{"pods"}) || !slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{"CREATE"}) {
		t.Errorf("rules %+v; want CREATE pods", w.Rules)
	}
	sel := w.NamespaceSelector.MatchExpressions
	if len(sel) != 2 || sel[0].Key != "kubernetes.io/metadata.name" || !slices.Contains(sel[0].Values, "kube-system") ||
		sel[1].Key != webhook.InjectKey || sel[1].Operator != "NotIn" {
		t.Errorf("namespaceSelector %+v", sel)
	}
	if o := w.ObjectSelector.MatchExpressions; len(o) != 1 || o[0].Key != "app.kubernetes.io/name" || o[0].Operator != "NotIn" ||
		dep.Spec.Template.Labels[o[0].Key] != o[0].Values[0] {
		t.Errorf("objectSelector %+v must leave out the webhook's own pods", o)
	}

	role := objs["Role/"+webhookName].(*rbacv1.Role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].ResourceNames, []string{webhookName + "-tls"}) || slices.Contains(role.Rules[0].Verbs, "create") {
		t.Errorf("Role %+v: want get/update on the chart's Secret only", role.Rules)
	}
	if _, ok := objs["Secret/"+webhookName+"-tls"]; !ok {
		t.Error("the chart must create the (empty) TLS Secret the webhook fills")
	}
	cr := objs["ClusterRole/"+webhookConfig].(*rbacv1.ClusterRole)
	if len(cr.Rules) != 2 || !slices.Equal(cr.Rules[1].ResourceNames, []string{webhookConfig}) || !slices.Equal(cr.Rules[1].Verbs, []string{"get", "update"}) {
		t.Errorf("ClusterRole %+v", cr.Rules)
	}
	for _, binding := range []rbacv1.Subject{objs["RoleBinding/"+webhookName].(*rbacv1.RoleBinding).Subjects[0], objs["ClusterRoleBinding/"+webhookConfig].(*rbacv1.ClusterRoleBinding).Subjects[0]} {
		if binding.Name != webhookName || binding.Namespace != namespace {
			t.Errorf("binding subject %+v is not the webhook's ServiceAccount", binding)
		}
	}

	// The exporter DaemonSet is unchanged by the webhook.
	if _, ok := objs["DaemonSet/"+fullname]; !ok {
		t.Error("node mode with the webhook must keep the DaemonSet")
	}
}

// TestWebhookLabelledNamespacesOnly: requireNamespaceLabel makes the API server call the
// webhook for labelled namespaces only.
func TestWebhookLabelledNamespacesOnly(t *testing.T) {
	ms, _ := render(t, "webhook: {enabled: true, requireNamespaceLabel: true, excludeNamespaces: [batch]}")
	mwc := decodeAll(t, ms)["MutatingWebhookConfiguration/"+webhookConfig].(*admissionregistrationv1.MutatingWebhookConfiguration)
	sel := mwc.Webhooks[0].NamespaceSelector.MatchExpressions
	if sel[1].Key != webhook.InjectKey || sel[1].Operator != "In" || !slices.Equal(sel[1].Values, []string{"enabled"}) {
		t.Errorf("namespaceSelector %+v", sel)
	}
	if !slices.Equal(sel[0].Values, []string{"kube-system", "batch"}) {
		t.Errorf("excluded namespaces %v", sel[0].Values)
	}
}

// TestWebhookCertManager: cert-manager issues the certificate, its CA injector fills the
// bundle, and the webhook gets no right to Secrets or to the configuration.
func TestWebhookCertManager(t *testing.T) {
	ms, _ := render(t, "webhook: {enabled: true, certManager: {enabled: true}}")
	objs := decodeAll(t, ms)
	cert := objs["Certificate/"+webhookName].(*certManagerCertificate)
	if cert.Spec.SecretName != webhookName+"-tls" || !slices.Equal(cert.Spec.DNSNames, []string{webhookName + "." + namespace + ".svc"}) ||
		cert.Spec.IssuerRef.Name != webhookName || cert.Spec.IssuerRef.Kind != "Issuer" {
		t.Errorf("Certificate %+v", cert.Spec)
	}
	if _, ok := objs["Issuer/"+webhookName]; !ok {
		t.Error("no self-signed Issuer")
	}
	mwc := objs["MutatingWebhookConfiguration/"+webhookConfig].(*admissionregistrationv1.MutatingWebhookConfiguration)
	if got := mwc.Annotations["cert-manager.io/inject-ca-from"]; got != namespace+"/"+webhookName {
		t.Errorf("inject-ca-from %q", got)
	}
	for _, k := range []string{"Role/" + webhookName, "Secret/" + webhookName + "-tls"} {
		if _, ok := objs[k]; ok {
			t.Errorf("%s rendered with cert-manager", k)
		}
	}
	dep := objs["Deployment/"+webhookName].(*appsv1.Deployment)
	c := container(t, dep.Spec.Template.Spec, "webhook", false)
	wantArgs(t, c, "--webhook.tls.cert-file=/etc/cupti-exporter/webhook-tls/tls.crt", "--webhook.tls.key-file=/etc/cupti-exporter/webhook-tls/tls.key")
	noArgPrefix(t, c, "--webhook.tls.secret")
	if v := volume(dep.Spec.Template.Spec, "tls"); v == nil || v.Secret == nil || v.Secret.SecretName != cert.Spec.SecretName {
		t.Errorf("tls volume %+v", v)
	}
	ms, _ = render(t, "webhook: {enabled: true, certManager: {enabled: true, issuerRef: {name: corp-ca, kind: ClusterIssuer}}}")
	objs = decodeAll(t, ms)
	if _, ok := objs["Issuer/"+webhookName]; ok {
		t.Error("an Issuer was rendered although issuerRef names one")
	}
	if ref := objs["Certificate/"+webhookName].(*certManagerCertificate).Spec.IssuerRef; ref.Name != "corp-ca" || ref.Kind != "ClusterIssuer" {
		t.Errorf("issuerRef %+v", ref)
	}
}

// TestWebhookWiringFile: the wiring the chart gives the webhook loads strictly, adds
// exactly the documented node-mode hand edits, and carries the sidecar-mode templates. It
// is the fixture of the webhook's own tests (-update-wiring rewrites it).
func TestWebhookWiringFile(t *testing.T) {
	ms, notes := render(t, "webhook: {enabled: true}")
	cm := decodeAll(t, ms)["ConfigMap/"+webhookName].(*corev1.ConfigMap)
	text := cm.Data["wiring.yaml"]
	file := filepath.Join(t.TempDir(), "wiring.yaml")
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := webhook.LoadConfig(file)
	if err != nil {
		t.Fatalf("the chart's wiring does not load: %v\n%s", err, numbered(text))
	}
	if *updateWiring {
		if err := os.WriteFile(wiringFixture, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want, err := os.ReadFile(wiringFixture); err != nil || !bytes.Equal(want, []byte(text)) {
		t.Errorf("%s differs from the chart's wiring (err %v): go test ./helm -run TestWebhookWiringFile -update-wiring", wiringFixture, err)
	}
	node := cfg.Node
	if len(node.Env) != 2 || node.Env[0].Value != "/run/cupti-exporter/libcupti_exporter_inject.so" || node.Env[1].Value != "/run/cupti-exporter/activity.sock" {
		t.Errorf("node env %+v", node.Env)
	}
	if v := node.Volumes[0]; v.HostPath == nil || v.HostPath.Path != "/run/cupti-exporter" || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("node volume %+v", v)
	}
	// NOTES.txt says how to opt a namespace in; without the webhook it shows the same hand
	// edits, with every variable the library reads, and points at the webhook.
	if !strings.Contains(notes, "kubectl label namespace <namespace> "+webhook.InjectKey+"=enabled") {
		t.Errorf("NOTES.txt with the webhook does not show the namespace label:\n%s", notes)
	}
	_, manual := render(t, "")
	for _, want := range []string{"CUDA_INJECTION64_PATH", "CUPTI_EXPORTER_SOCKET", "POD_NAME", "POD_NAMESPACE", "CONTAINER_NAME", "DirectoryOrCreate", "webhook.enabled=true"} {
		if !strings.Contains(manual, want) {
			t.Errorf("NOTES.txt does not mention %s", want)
		}
	}
	sidecar := cfg.Sidecar
	if len(sidecar.InitContainers) != 2 || sidecar.InitContainers[1].RestartPolicy == nil || *sidecar.InitContainers[1].RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("sidecar init containers %+v: want the copy and the native sidecar", sidecar.InitContainers)
	}
	if sidecar.PodLabels["cupti-exporter.io/sidecar"] != "true" {
		t.Errorf("sidecar pods must carry the PodMonitor's selector labels, got %v", sidecar.PodLabels)
	}
}
