package e2e

// TestWebhookAgainstAPIServer runs the admission webhook (`cupti-exporter webhook`, with the
// flags, wiring, RBAC and MutatingWebhookConfiguration the chart renders) against a real
// kube-apiserver and etcd, with the API server's own Pod Security and ServiceAccount
// admission, and asserts on the pods the API server stored. No kubelet or scheduler: pods
// stay Pending, which is all admission needs. It runs when KUBE_BIN_DIR names a folder
// holding kube-apiserver and etcd (scripts/ci/kube-apiserver.sh builds them; .ci/run sets it).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/webhook"
)

const (
	whRelease   = "cupti"
	whNamespace = "monitoring"
	adminToken  = "e2e-admin-token"
)

func freePort(t *testing.T) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(testutil.FreeAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// startProcess runs a helper binary with its output in the test log on failure; stop ends
// it early.
func startProcess(t *testing.T, name string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(name, args...)
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p := testutil.Start(t, cmd, func() {
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), tail(out.String(), 6000))
		}
	})
	return func() {
		cmd.Process.Signal(os.Interrupt)
		<-p.Done()
	}
}

// startAPIServer starts etcd and kube-apiserver from the folder KUBE_BIN_DIR names, skipping
// the test where it is not set, and returns an admin client config and a client of it.
func startAPIServer(t *testing.T) (*rest.Config, *kubernetes.Clientset) {
	t.Helper()
	bin := os.Getenv("KUBE_BIN_DIR")
	if bin == "" {
		t.Skip("KUBE_BIN_DIR is not set: build kube-apiserver and etcd with scripts/ci/kube-apiserver.sh (.ci/run does)")
	}
	dir := t.TempDir()
	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	startProcess(t, filepath.Join(bin, "etcd"), "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", peerPort),
		"--log-level=warn", "--quota-backend-bytes=268435456")
	// kube-apiserver gives up when etcd does not answer within 20 s (CI saw it: etcd slow to
	// start on a loaded machine, the API server exited, the test waited out its 120 s), so it
	// starts once etcd serves.
	testutil.WaitFor(t, "etcd /health", 120*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get(etcdURL + "/health")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
	})

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalECPrivateKey(key)
	keyFile := filepath.Join(dir, "sa.key")
	write(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	tokens := filepath.Join(dir, "tokens.csv")
	write(t, tokens, []byte(adminToken+",e2e-admin,e2e-admin,system:masters\n"))
	startProcess(t, filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", apiPort), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+keyFile,
		"--service-account-signing-key-file="+keyFile, "--service-cluster-ip-range=10.96.0.0/24",
		"--enable-priority-and-fairness=false", "--endpoint-reconciler-type=none", "-v=1")
	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", apiPort), BearerToken: adminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 2 * time.Second}
	testutil.WaitFor(t, "kube-apiserver /readyz", 120*time.Second, 100*time.Millisecond, func() bool {
		req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

func write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// chartDoc is one document the chart rendered.
type chartDoc struct {
	kind string
	yaml []byte
}

// decode fills into from the document strictly: a field the API type lacks fails the test.
func (d chartDoc) decode(t *testing.T, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(d.yaml, into); err != nil {
		t.Fatalf("%s: %v", d.kind, err)
	}
}

// renderChart renders the chart as `helm install` does, release in whNamespace with values,
// and returns the documents of the YAML templates whose file name keep accepts, in file order.
func renderChart(t *testing.T, release string, values map[string]any, keep func(file string) bool) []chartDoc {
	t.Helper()
	ch, err := loader.Load("../helm/cupti-exporter")
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: release, Namespace: whNamespace, IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for f := range out {
		if strings.HasSuffix(f, ".yaml") && keep(path.Base(f)) {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	var docs []chartDoc
	for _, f := range files {
		for _, doc := range strings.Split(out[f], "\n---") {
			var head metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if head.Kind != "" { // not a document the template left empty
				docs = append(docs, chartDoc{kind: head.Kind, yaml: []byte(doc)})
			}
		}
	}
	return docs
}

// createRendered creates the object of a rendered document, of a kind the API server stores
// as sent with no kubelet or controllers (in whNamespace where namespaced), and returns what
// it stored. Any other kind fails the test.
func createRendered(t *testing.T, ctx context.Context, c kubernetes.Interface, d chartDoc) any {
	t.Helper()
	switch d.kind {
	case "ConfigMap":
		return createDecoded(t, ctx, d, c.CoreV1().ConfigMaps(whNamespace).Create)
	case "Secret":
		return createDecoded(t, ctx, d, c.CoreV1().Secrets(whNamespace).Create)
	case "ServiceAccount":
		return createDecoded(t, ctx, d, c.CoreV1().ServiceAccounts(whNamespace).Create)
	case "Role":
		return createDecoded(t, ctx, d, c.RbacV1().Roles(whNamespace).Create)
	case "RoleBinding":
		return createDecoded(t, ctx, d, c.RbacV1().RoleBindings(whNamespace).Create)
	case "ClusterRole":
		return createDecoded(t, ctx, d, c.RbacV1().ClusterRoles().Create)
	case "ClusterRoleBinding":
		return createDecoded(t, ctx, d, c.RbacV1().ClusterRoleBindings().Create)
	}
	t.Fatalf("unexpected kind %s in the chart", d.kind)
	return nil
}

func createDecoded[T any](t *testing.T, ctx context.Context, d chartDoc, create func(context.Context, *T, metav1.CreateOptions) (*T, error)) *T {
	t.Helper()
	var o T
	d.decode(t, &o)
	got, err := create(ctx, &o, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s: %v", d.kind, err)
	}
	return got
}

// createNamespace creates a namespace with labels and its default ServiceAccount, which the
// API server's ServiceAccount admission needs and no controller-manager creates here.
func createNamespace(t *testing.T, ctx context.Context, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	mustCreate(t, func() error {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := c.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		return err
	})
}

// webhookObjects are the chart's webhook objects, as the test applies them.
type webhookObjects struct {
	deployment *appsv1.Deployment
	wiring     string
	config     *admissionregistrationv1.MutatingWebhookConfiguration
}

// installChart creates the chart's webhook objects (but the Deployment and Service, which
// need a kubelet) and registers the webhook by URL: without kube-proxy and endpoints the
// API server cannot reach a Service, so the Service reference becomes the loopback address
// the test runs the webhook on. Everything else is as rendered.
func installChart(t *testing.T, ctx context.Context, c kubernetes.Interface, url string) webhookObjects {
	t.Helper()
	createNamespace(t, ctx, c, whNamespace, nil)
	var objs webhookObjects
	webhookFiles := func(f string) bool { return strings.Contains(f, "webhook") }
	for _, d := range renderChart(t, whRelease, map[string]any{"webhook": map[string]any{"enabled": true}}, webhookFiles) {
		switch d.kind {
		case "ConfigMap":
			objs.wiring = createRendered(t, ctx, c, d).(*corev1.ConfigMap).Data["wiring.yaml"]
		case "MutatingWebhookConfiguration":
			var o admissionregistrationv1.MutatingWebhookConfiguration
			d.decode(t, &o)
			o.Webhooks[0].ClientConfig.Service = nil
			o.Webhooks[0].ClientConfig.URL = &url
			var err error
			if objs.config, err = c.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &o, metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating %s: %v", d.kind, err)
			}
		case "Deployment":
			objs.deployment = &appsv1.Deployment{}
			d.decode(t, objs.deployment)
		case "Service", "PodDisruptionBudget":
		default:
			createRendered(t, ctx, c, d)
		}
	}
	if objs.deployment == nil || objs.config == nil || objs.wiring == "" {
		t.Fatal("the chart rendered no webhook Deployment, configuration or wiring")
	}
	return objs
}

func mustCreate(t *testing.T, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatal(err)
	}
}

// webhookKubeconfig writes a kubeconfig with a token of the webhook's ServiceAccount, so
// the webhook runs with exactly the chart's RBAC.
func webhookKubeconfig(t *testing.T, ctx context.Context, c kubernetes.Interface, host, sa string) string {
	t.Helper()
	tok, err := c.CoreV1().ServiceAccounts(whNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["webhook"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "webhook"}
	kc.CurrentContext = "e2e"
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}
	return file
}

// webhookArgs are the Deployment's arguments, with the listen addresses and files of this
// test, and the loopback IP in the certificate (the webhook is registered by URL).
func webhookArgs(t *testing.T, dep *appsv1.Deployment, wiringFile, kubeconfig string, port, healthPort int) []string {
	t.Helper()
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--webhook.listen-address="):
			a = fmt.Sprintf("--webhook.listen-address=127.0.0.1:%d", port)
		case strings.HasPrefix(a, "--webhook.health-listen-address="):
			a = fmt.Sprintf("--webhook.health-listen-address=127.0.0.1:%d", healthPort)
		case strings.HasPrefix(a, "--webhook.wiring-file="):
			a = "--webhook.wiring-file=" + wiringFile
		}
		args = append(args, a)
	}
	return append(args, "--webhook.tls.ip-addresses=127.0.0.1", "--webhook.tls.namespace="+whNamespace,
		"--kubernetes.kubeconfig="+kubeconfig, "--log.level=debug")
}

func gpuPod(name string, annotations map[string]string, restricted bool) *corev1.Pod {
	c := corev1.Container{Name: "trainer", Image: "pytorch",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{c, {Name: "logger", Image: "fluentbit"}}}}
	if restricted { // what Pod Security "restricted" asks of the workload itself
		no, yes := false, true
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		for i := range p.Spec.Containers {
			p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: &no,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		}
	}
	return p
}

// volumesOf leaves out the service account token volume the API server's ServiceAccount
// admission adds to every pod.
func volumesOf(p *corev1.Pod) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if !strings.HasPrefix(v.Name, "kube-api-access-") {
			out = append(out, v)
		}
	}
	return out
}

func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

func TestWebhookAgainstAPIServer(t *testing.T) {
	ctx := context.Background()
	cfg, c := startAPIServer(t)
	port, healthPort := freePort(t), freePort(t)
	objs := installChart(t, ctx, c, fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.MutatePath))
	wiringFile := filepath.Join(t.TempDir(), "wiring.yaml")
	write(t, wiringFile, []byte(objs.wiring))
	kubeconfig := webhookKubeconfig(t, ctx, c, cfg.Host, objs.deployment.Spec.Template.Spec.ServiceAccountName)
	args := webhookArgs(t, objs.deployment, wiringFile, kubeconfig, port, healthPort)
	stopWebhook := startProcess(t, binary, args...)

	// The webhook fills the chart's Secret and patches the CA bundle, with the chart's RBAC.
	testutil.WaitFor(t, "the webhook's /readyz", 60*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	mwc, err := c.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, objs.config.Name, metav1.GetOptions{})
	if err != nil || len(mwc.Webhooks[0].ClientConfig.CABundle) == 0 {
		t.Fatalf("caBundle not patched: %v", err)
	}

	namespaces := map[string]map[string]string{
		"ml":     {webhook.InjectKey: "enabled", webhook.PodSecurityEnforceKey: "privileged"},
		"plain":  {},
		"secure": {webhook.InjectKey: "enabled", webhook.PodSecurityEnforceKey: "restricted"},
		"off":    {webhook.InjectKey: "disabled"},
	}
	for name, labels := range namespaces {
		createNamespace(t, ctx, c, name, labels)
	}
	create := func(ns string, p *corev1.Pod) *corev1.Pod {
		t.Helper()
		got, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating pod %s/%s: %v", ns, p.Name, err)
		}
		return got
	}
	wired := func(p *corev1.Pod, mode string) {
		t.Helper()
		if p.Annotations[webhook.WiringKey] != mode {
			t.Fatalf("pod %s/%s: wiring %q; want %q (annotations %v)", p.Namespace, p.Name, p.Annotations[webhook.WiringKey], mode, p.Annotations)
		}
		trainer := p.Spec.Containers[0]
		e := envOf(trainer)
		for _, name := range []string{"CUDA_INJECTION64_PATH", "CUPTI_EXPORTER_SOCKET", "POD_NAME", "POD_NAMESPACE", "CONTAINER_NAME"} {
			if _, ok := e[name]; !ok {
				t.Errorf("pod %s/%s: %s missing from %+v", p.Namespace, p.Name, name, trainer.Env)
			}
		}
		if e["CONTAINER_NAME"].Value != "trainer" || e["POD_NAME"].ValueFrom.FieldRef.FieldPath != "metadata.name" {
			t.Errorf("pod %s/%s: %+v", p.Namespace, p.Name, trainer.Env)
		}
		if len(p.Spec.Containers[1].Env) != 0 {
			t.Errorf("pod %s/%s: the container without a GPU was wired", p.Namespace, p.Name)
		}
	}
	unchanged := func(sent, got *corev1.Pod) {
		t.Helper()
		if got.Annotations[webhook.WiringKey] != "" || !equality.Semantic.DeepEqual(sent.Spec.Containers[0].Env, got.Spec.Containers[0].Env) ||
			!equality.Semantic.DeepEqual(volumesOf(sent), volumesOf(got)) || len(got.Spec.InitContainers) != len(sent.Spec.InitContainers) {
			t.Errorf("pod %s/%s was changed: annotations %v, env %+v, volumes %+v", got.Namespace, got.Name, got.Annotations, got.Spec.Containers[0].Env, got.Spec.Volumes)
		}
	}

	// Labelled, Pod Security privileged: node wiring (hostPath).
	p := create("ml", gpuPod("gpu", nil, false))
	wired(p, "node")
	if v := volumesOf(p); len(v) != 1 || v[0].HostPath == nil {
		t.Errorf("node wiring volumes %+v", v)
	}
	// Labelled, Pod Security restricted: the sidecar, and the API server's PodSecurity
	// admission accepted the result (it runs after mutation).
	p = create("secure", gpuPod("gpu", nil, true))
	wired(p, "sidecar")
	if ics := p.Spec.InitContainers; len(ics) != 2 || ics[1].Name != "cupti-exporter" {
		t.Errorf("sidecar wiring init containers %+v", ics)
	}
	// Unlabelled, namespace opted out, pod opted out, no GPU: as sent.
	for _, c := range []struct {
		ns  string
		pod *corev1.Pod
	}{
		{"plain", gpuPod("gpu", nil, false)},
		{"off", gpuPod("gpu", nil, false)},
		{"ml", gpuPod("opted-out", map[string]string{webhook.InjectKey: "disabled"}, false)},
		{"ml", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "trainer", Image: "x"}}}}},
	} {
		unchanged(c.pod, create(c.ns, c.pod.DeepCopy()))
	}
	// A pod's own annotation opts it in anywhere.
	wired(create("plain", gpuPod("annotated", map[string]string{webhook.InjectKey: "enabled"}, false)), "node")

	// A pod wired by hand (the documented edits) is left as it was.
	manual := gpuPod("manual", nil, false)
	manual.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "CUDA_INJECTION64_PATH", Value: "/run/cupti-exporter/libcupti_exporter_inject.so"},
		{Name: "CUPTI_EXPORTER_SOCKET", Value: "/run/cupti-exporter/activity.sock"}}
	manual.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cupti-exporter", MountPath: "/run/cupti-exporter", ReadOnly: true}}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	manual.Spec.Volumes = []corev1.Volume{{Name: "cupti-exporter", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/cupti-exporter", Type: &dirOrCreate}}}}
	unchanged(manual, create("ml", manual.DeepCopy()))
	// Another tool's CUDA_INJECTION64_PATH is kept and named.
	nsight := gpuPod("nsight", nil, false)
	nsight.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CUDA_INJECTION64_PATH", Value: "/opt/nsight/libToolsInjection64.so"}}
	if p = create("ml", nsight); p.Annotations[webhook.KeptInjectionKey] != "trainer" || envOf(p.Spec.Containers[0])["CUDA_INJECTION64_PATH"].Value != "/opt/nsight/libToolsInjection64.so" {
		t.Errorf("own injection path: annotations %v, env %+v", p.Annotations, p.Spec.Containers[0].Env)
	}
	// Mutating twice changes nothing: a pod created from a wired pod's spec is stored as sent.
	first := create("ml", gpuPod("first", nil, false))
	again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "again", Annotations: first.Annotations}, Spec: *first.Spec.DeepCopy()}
	if second := create("ml", again.DeepCopy()); !equality.Semantic.DeepEqual(second.Spec, first.Spec) {
		t.Errorf("a wired pod's spec was changed on its second admission")
	}

	// A Deployment's pods are created by the ReplicaSet controller (not running here); the
	// Deployment itself is stored unchanged, and its pod template, created as a pod the way
	// the controller would (generateName, no name), is wired.
	replicas := int32(1)
	tmpl := gpuPod("", nil, false)
	dep, err := c.AppsV1().Deployments("ml").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "trainer"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "trainer"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "trainer"}}, Spec: tmpl.Spec}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(dep.Spec.Template.Spec.Containers[0].Env) != 0 || dep.Spec.Template.Annotations[webhook.WiringKey] != "" {
		t.Error("the Deployment's template was changed (the webhook mutates pods only)")
	}
	fromTemplate := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "trainer-5d9c7-", Labels: dep.Spec.Template.Labels}, Spec: dep.Spec.Template.Spec}
	wired(create("ml", fromTemplate), "node")

	// Admission latency added per pod: pods the webhook wires against pods in a namespace
	// the API server does not call it for (labelled disabled).
	round := 0
	latency := func(ns string, n int) time.Duration {
		round++
		var ds []time.Duration
		for i := range n {
			start := time.Now()
			create(ns, gpuPod(fmt.Sprintf("lat-%d-%d", round, i), nil, false))
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	latency("ml", 5) // warm connections
	base, withWebhook := latency("off", 30), latency("ml", 30)
	t.Logf("pod create, median of 30: %v without the webhook, %v with it (wired): %v added", base, withWebhook, withWebhook-base)

	// The webhook down: pods are still admitted (failurePolicy Ignore), unwired, at once
	// (connection refused).
	stopWebhook()
	start := time.Now()
	down := create("ml", gpuPod("webhook-down", nil, false))
	t.Logf("pod create with the webhook down (connection refused): %v", time.Since(start))
	unchanged(gpuPod("webhook-down", nil, false), down)
	// A hung endpoint: admitted after the configuration's timeout.
	hung, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	go func() {
		for {
			conn, err := hung.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // never answers
		}
	}()
	start = time.Now()
	unchanged(gpuPod("webhook-hung", nil, false), create("ml", gpuPod("webhook-hung", nil, false)))
	took := time.Since(start)
	t.Logf("pod create with a hung webhook: %v (timeoutSeconds %d)", took, *mwc.Webhooks[0].TimeoutSeconds)
	if limit := time.Duration(*mwc.Webhooks[0].TimeoutSeconds)*time.Second + 5*time.Second; took > limit {
		t.Errorf("a hung webhook held a pod creation %v", took)
	}
}
