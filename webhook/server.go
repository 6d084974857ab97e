package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxReviewBytes bounds an AdmissionReview body: the API server stores objects of at most
// 1.5 MiB (etcd's limit), and a review carries the object once on create.
const MaxReviewBytes = 4 << 20

// MutatePath is where the API server posts AdmissionReviews.
const MutatePath = "/mutate"

var admissions = prometheus.NewDesc("cupti_webhook_admissions_total",
	"Pod admissions by result: wired_node, wired_sidecar, or why the pod was left as it was.", []string{"result"}, nil)

// durationBuckets cover a cached decision (tens of µs) to a namespace read from the API
// server (ms).
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5}

// Server answers AdmissionReviews with the Mutator's patch. It always allows: a pod it
// cannot wire is admitted as it is. Safe for concurrent use.
type Server struct {
	mutator  *Mutator
	logger   *slog.Logger
	results  *counters
	duration prometheus.Histogram
}

// NewServer returns a Server over m.
func NewServer(m *Mutator, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{mutator: m, logger: logger, results: newCounters(Results...),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cupti_webhook_admission_duration_seconds",
			Help:    "Time from reading an AdmissionReview to writing the answer.",
			Buckets: durationBuckets})}
}

// ServeHTTP handles POST MutatePath.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.duration.Observe(time.Since(start).Seconds()) }()
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	review, err := readReview(w, r)
	if err != nil {
		s.results.inc(ResultBadRequest)
		s.logger.Warn("bad admission request", "err", err)
		status := http.StatusBadRequest
		if errors.As(err, new(*http.MaxBytesError)) {
			status = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), status)
		return
	}
	resp := s.review(r, review.Request)
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		s.logger.Debug("writing the admission response", "err", err)
	}
}

func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxReviewBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if review.Request == nil {
		return nil, errors.New("the AdmissionReview has no request")
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return nil, fmt.Errorf("want an admission.k8s.io/v1 AdmissionReview, got %s %s", review.APIVersion, review.Kind)
	}
	return &review, nil
}

var podResource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}

// review answers one request, allowed in every case.
func (s *Server) review(r *http.Request, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Resource != podResource || req.SubResource != "" || req.Operation != admissionv1.Create {
		s.results.inc(ResultNotAPod)
		return resp
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		s.results.inc(ResultBadRequest)
		s.logger.Warn("undecodable pod admitted unwired", "namespace", req.Namespace, "err", err)
		return resp
	}
	patch, result, err := s.mutator.Mutate(r.Context(), &pod, req.Namespace)
	s.results.inc(result)
	name := pod.Name
	if name == "" {
		name = pod.GenerateName + "*"
	}
	if err != nil {
		s.logger.Warn("pod admitted unwired", "namespace", req.Namespace, "pod", name, "result", result, "err", err)
		return resp
	}
	s.logger.Debug("admission", "namespace", req.Namespace, "pod", name, "result", result)
	if patch != nil {
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
	}
	return resp
}

// Result returns how many admissions had result (tests, benchmarks).
func (s *Server) Result(result string) uint64 { return s.results.get(result) }

// Describe implements prometheus.Collector.
func (s *Server) Describe(ch chan<- *prometheus.Desc) {
	ch <- admissions
	ch <- s.duration.Desc()
}

// Collect implements prometheus.Collector.
func (s *Server) Collect(ch chan<- prometheus.Metric) {
	s.results.collect(ch, admissions)
	ch <- s.duration
}
