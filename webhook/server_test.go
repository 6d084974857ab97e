package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func reviewBody(t testing.TB, pod *corev1.Pod, ns string) []byte {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "uid-1", Namespace: ns, Operation: admissionv1.Create,
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object:   runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t testing.TB, s *Server, body []byte) (*httptest.ResponseRecorder, *admissionv1.AdmissionReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, MutatePath, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return rec, &out
}

func TestServerAnswers(t *testing.T) {
	s := NewServer(testMutator(t), nil)
	_, out := post(t, s, reviewBody(t, gpuPod("a"), "ml"))
	r := out.Response
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || r.UID != "uid-1" || !r.Allowed ||
		r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v", out)
	}
	checkWired(t, applyPatch(t, gpuPod("a"), r.Patch).Spec.Containers[0], "/run/cupti-exporter/activity.sock")

	// Left alone: allowed, no patch.
	_, out = post(t, s, reviewBody(t, gpuPod("a"), "plain"))
	if !out.Response.Allowed || out.Response.Patch != nil || out.Response.PatchType != nil {
		t.Errorf("unselected pod: %+v", out.Response)
	}
	// The namespace cannot be read: still allowed.
	_, out = post(t, s, reviewBody(t, gpuPod("a"), "gone"))
	if !out.Response.Allowed || out.Response.Patch != nil {
		t.Errorf("unknown namespace: %+v", out.Response)
	}
	// Not a pod creation.
	var review admissionv1.AdmissionReview
	_ = json.Unmarshal(reviewBody(t, gpuPod("a"), "ml"), &review)
	review.Request.Operation = admissionv1.Update
	b, _ := json.Marshal(review)
	if _, out = post(t, s, b); !out.Response.Allowed || out.Response.Patch != nil {
		t.Errorf("update: %+v", out.Response)
	}

	// Refusals of the HTTP request itself: the API server then applies failurePolicy
	// Ignore, so the pod is still admitted.
	for _, c := range []struct {
		name string
		body []byte
		code int
	}{
		{"not JSON", []byte("{"), http.StatusBadRequest},
		{"no request", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest},
		{"v1beta1", []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`), http.StatusBadRequest},
		{"oversized", bytes.Repeat([]byte(" "), MaxReviewBytes+1), http.StatusRequestEntityTooLarge},
	} {
		if rec, _ := post(t, s, c.body); rec.Code != c.code {
			t.Errorf("%s: status %d; want %d", c.name, rec.Code, c.code)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, MutatePath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}

	want := map[string]uint64{ResultWiredNode: 1, ResultNotOptedIn: 1, ResultNamespaceUnknown: 1, ResultNotAPod: 1, ResultBadRequest: 4}
	for result, n := range want {
		if got := s.Result(result); got != n {
			t.Errorf("%s: %d; want %d", result, got, n)
		}
	}
	if err := testutil.CollectAndCompare(s, strings.NewReader(`
# HELP cupti_webhook_admissions_total Pod admissions by result: wired_node, wired_sidecar, or why the pod was left as it was.
# TYPE cupti_webhook_admissions_total counter
cupti_webhook_admissions_total{result="already_wired"} 0
cupti_webhook_admissions_total{result="bad_request"} 4
cupti_webhook_admissions_total{result="excluded_namespace"} 0
cupti_webhook_admissions_total{result="namespace_unknown"} 1
cupti_webhook_admissions_total{result="not_a_pod"} 1
cupti_webhook_admissions_total{result="not_gpu"} 0
cupti_webhook_admissions_total{result="not_opted_in"} 1
cupti_webhook_admissions_total{result="nothing_to_wire"} 0
cupti_webhook_admissions_total{result="opted_out"} 0
cupti_webhook_admissions_total{result="own_pod"} 0
cupti_webhook_admissions_total{result="wired_by_hand"} 0
cupti_webhook_admissions_total{result="wired_node"} 1
cupti_webhook_admissions_total{result="wired_sidecar"} 0
`), "cupti_webhook_admissions_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(registryOf(t, s), "cupti_webhook_admission_duration_seconds"); err != nil || n != 1 {
		t.Errorf("duration histogram: %d, %v", n, err)
	}
	if problems, err := testutil.CollectAndLint(s); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// BenchmarkAdmission is the webhook's own time per pod: decode the review, decide, build
// the patch, encode the answer (a GPU pod in a labelled namespace, namespace from cache).
func BenchmarkAdmission(b *testing.B) {
	s := NewServer(testMutator(b), nil)
	body := reviewBody(b, gpuPod("a"), "ml")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, MutatePath, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}

// BenchmarkAdmissionHTTPS adds what the API server's call costs on loopback: TLS on a
// kept-alive connection, HTTP framing (the API server reuses connections to webhooks).
func BenchmarkAdmissionHTTPS(b *testing.B) {
	s := NewServer(testMutator(b), nil)
	srv := httptest.NewTLSServer(s)
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).TLSClientConfig.MinVersion = tls.VersionTLS12
	body := reviewBody(b, gpuPod("a"), "ml")
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(srv.URL+MutatePath, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		var out admissionv1.AdmissionReview
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response.Patch == nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

func registryOf(t testing.TB, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	r := prometheus.NewPedanticRegistry()
	if err := r.Register(c); err != nil {
		t.Fatal(err)
	}
	return r
}
