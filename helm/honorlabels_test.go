package helm

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/scrape"
	"github.com/prometheus/prometheus/storage"
	"sigs.k8s.io/yaml"
)

// exporterExposition is what a node exporter serves for two GPUs, one held by a pod
// (the labels exporter/labels.go appends to every family with a uuid: pod, namespace,
// container, empty when no pod holds the GPU), and a self metric without them.
const exporterExposition = `# TYPE cupti_sm_active_ratio gauge
cupti_sm_active_ratio{gpu="0",uuid="GPU-0",pod="trainer-0",namespace="ml",container="trainer"} 0.5
cupti_sm_active_ratio{gpu="1",uuid="GPU-1",pod="",namespace="",container=""} 0
# TYPE cupti_exporter_build_info gauge
cupti_exporter_build_info{version="0.1.0"} 1
`

// exporterPod is the target as Kubernetes service discovery describes the exporter pod
// of a DaemonSet behind the chart's Service (role endpoints) or directly (role pod).
var exporterPod = model.LabelSet{
	"__meta_kubernetes_namespace":                            "monitoring",
	"__meta_kubernetes_service_name":                         fullname,
	"__meta_kubernetes_pod_name":                             fullname + "-x7k2p",
	"__meta_kubernetes_pod_container_name":                   "exporter",
	"__meta_kubernetes_pod_container_port_name":              "metrics",
	"__meta_kubernetes_endpoint_port_name":                   "metrics",
	"__meta_kubernetes_endpoint_address_target_kind":         "Pod",
	"__meta_kubernetes_endpoint_address_target_name":         fullname + "-x7k2p",
	"__meta_kubernetes_pod_node_name":                        "gpu-node-1",
	"__meta_kubernetes_pod_phase":                            "Running",
	"__meta_kubernetes_service_label_app_kubernetes_io_name": "cupti-exporter",
}

// operatorRelabelings are the target relabelings prometheus-operator generates before an
// endpoint's own (pkg/prometheus/promcfg.go; its golden files HonorLabelsOverriding and
// the PodMonitor test): the target labels namespace, service, pod, container, job and
// endpoint that collide with the exporter's labels.
func operatorRelabelings(kind string) string {
	if kind == "ServiceMonitor" {
		return `
  - {source_labels: [job], target_label: __tmp_prometheus_job_name}
  - {action: keep, source_labels: [__meta_kubernetes_endpoint_port_name], regex: metrics}
  - {source_labels: [__meta_kubernetes_endpoint_address_target_kind, __meta_kubernetes_endpoint_address_target_name], separator: ";", regex: "Node;(.*)", replacement: "${1}", target_label: node}
  - {source_labels: [__meta_kubernetes_endpoint_address_target_kind, __meta_kubernetes_endpoint_address_target_name], separator: ";", regex: "Pod;(.*)", replacement: "${1}", target_label: pod}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_service_name], target_label: service}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}
  - {action: drop, source_labels: [__meta_kubernetes_pod_phase], regex: (Failed|Succeeded)}
  - {source_labels: [__meta_kubernetes_service_name], target_label: job, replacement: "${1}"}
  - {target_label: endpoint, replacement: metrics}`
	}
	return `
  - {source_labels: [job], target_label: __tmp_prometheus_job_name}
  - {action: keep, source_labels: [__meta_kubernetes_pod_container_port_name], regex: metrics}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {target_label: job, replacement: ` + namespace + "/" + fullname + `}
  - {target_label: endpoint, replacement: metrics}`
}

// promRelabel writes relabelings of the chart (operator field names) in Prometheus'
// configuration syntax, as the operator does.
func promRelabel(rs []relabelConfig) string {
	var b strings.Builder
	for _, r := range rs {
		m := map[string]any{}
		if len(r.SourceLabels) > 0 {
			m["source_labels"] = r.SourceLabels
		}
		if r.Separator != nil {
			m["separator"] = *r.Separator
		}
		if r.TargetLabel != "" {
			m["target_label"] = r.TargetLabel
		}
		if r.Regex != "" {
			m["regex"] = r.Regex
		}
		if r.Modulus != 0 {
			m["modulus"] = r.Modulus
		}
		if r.Replacement != nil {
			m["replacement"] = *r.Replacement
		}
		if r.Action != "" {
			m["action"] = strings.ToLower(r.Action)
		}
		j, _ := yaml.Marshal(m)
		fmt.Fprintf(&b, "\n  - %s", strings.ReplaceAll(strings.TrimSpace(string(j)), "\n", "\n    "))
	}
	return b.String()
}

// capture is a storage.AppendableV2 keeping the label sets of the latest scrape.
type capture struct {
	mu     sync.Mutex
	series map[string]labels.Labels // by __name__ and gpu
}

func (c *capture) AppenderV2(context.Context) storage.AppenderV2 { return &captureAppender{c: c} }

type captureAppender struct {
	c   *capture
	got []labels.Labels
}

func (a *captureAppender) Append(_ storage.SeriesRef, ls labels.Labels, _, _ int64, _ float64, _ *histogram.Histogram, _ *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	a.got = append(a.got, ls.Copy())
	return 1, nil
}

func (a *captureAppender) Commit() error {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	for _, ls := range a.got {
		a.c.series[ls.Get("__name__")+"/"+ls.Get("gpu")] = ls
	}
	return nil
}

func (a *captureAppender) Rollback() error { return nil }

// scrapeThroughPrometheus scrapes exporterExposition with Prometheus' own scrape code,
// configured as prometheus-operator configures it for the rendered monitor (honor_labels,
// relabelings, metric relabelings), and returns the stored label sets.
func scrapeThroughPrometheus(t *testing.T, kind string, ep endpointCommon) map[string]labels.Labels {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, exporterExposition)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)

	job := strings.ToLower(kind[:1]) + kind[1:] + "/" + namespace + "/" + fullname + "/0"
	cfgText := fmt.Sprintf(`global: {scrape_interval: 100ms, scrape_timeout: 100ms}
scrape_configs:
- job_name: %s
  honor_labels: %v
  metrics_path: %s
  scheme: http
  relabel_configs:%s%s
  metric_relabel_configs:%s
`, job, ep.HonorLabels, ep.Path, operatorRelabelings(kind), promRelabel(ep.Relabelings), promRelabel(ep.MetricRelabelings))
	if len(ep.MetricRelabelings) == 0 {
		cfgText = strings.Replace(cfgText, "  metric_relabel_configs:\n", "", 1)
	}
	cfg, err := config.Load(cfgText, nil)
	if err != nil {
		t.Fatalf("the operator-style scrape configuration does not load: %v\n%s", err, cfgText)
	}
	store := &capture{series: map[string]labels.Labels{}}
	m, err := scrape.NewManager(&scrape.Options{DiscoveryReloadOnStartup: true}, nil, nil, nil, store, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	target := exporterPod.Clone()
	target[model.AddressLabel] = model.LabelValue(u.Host)
	tsets := make(chan map[string][]*targetgroup.Group, 1)
	tsets <- map[string][]*targetgroup.Group{job: {{Source: "k8s", Targets: []model.LabelSet{target}}}}
	go m.Run(tsets)
	defer m.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		store.mu.Lock()
		n := len(store.series)
		store.mu.Unlock()
		if n >= 4 { // 3 exposed series and up
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if len(store.series) < 4 {
		t.Fatalf("Prometheus scraped %d series in 10 s; want the exposition and up\n%s", len(store.series), cfgText)
	}
	return store.series
}

// TestHonorLabelsKeepPodLabels proves, with Prometheus' scrape code and the target labels
// prometheus-operator adds, that the chart's ServiceMonitor and PodMonitor defaults keep
// the exporter's pod, namespace and container labels (the workload's), that a GPU no pod
// holds is not credited to the exporter pod, and that the target keeps its own identity
// (job, node, instance) on up. The honorLabels=false case shows what the test guards:
// every series credited to the exporter pod, the owner moved to exported_pod.
func TestHonorLabelsKeepPodLabels(t *testing.T) {
	for _, kind := range []string{"ServiceMonitor", "PodMonitor"} {
		t.Run(kind, func(t *testing.T) {
			values := "serviceMonitor: {enabled: true}"
			if kind == "PodMonitor" {
				values = "podMonitor: {enabled: true}"
			}
			ms, _ := render(t, values)
			var ep endpointCommon
			switch o := decodeStrict(t, find(t, ms, kind)).(type) {
			case *serviceMonitor:
				ep = o.Spec.Endpoints[0].endpointCommon
			case *podMonitor:
				ep = o.Spec.PodMetricsEndpoints[0].endpointCommon
			}
			if !ep.HonorLabels {
				t.Fatalf("%s renders honorLabels: false by default", kind)
			}
			got := scrapeThroughPrometheus(t, kind, ep)

			held := got["cupti_sm_active_ratio/0"]
			for k, v := range map[string]string{"pod": "trainer-0", "namespace": "ml", "container": "trainer", "node": "gpu-node-1"} {
				if held.Get(k) != v {
					t.Errorf("GPU held by a pod: %s=%q; want %q (series %s)", k, held.Get(k), v, held)
				}
			}
			for _, k := range []string{"exported_pod", "exported_namespace", "exported_container"} {
				if held.Has(k) {
					t.Errorf("GPU held by a pod carries %s: %s", k, held)
				}
			}
			free := got["cupti_sm_active_ratio/1"]
			if free.Get("pod") != "" || free.Get("container") != "" || free.Get("namespace") != "" {
				t.Errorf("GPU no pod holds is credited to %s/%s (%s): %s", free.Get("namespace"), free.Get("pod"), free.Get("container"), free)
			}
			up := got["up/"]
			wantJob := fullname
			if kind == "PodMonitor" {
				wantJob = namespace + "/" + fullname
			}
			if up.Get("pod") != fullname+"-x7k2p" || up.Get("namespace") != "monitoring" || up.Get("job") != wantJob || up.Get("node") != "gpu-node-1" {
				t.Errorf("up %s; want the exporter pod's identity and job %q (prometheusRule's upSelector)", up, wantJob)
			}
			if self := got["cupti_exporter_build_info/"]; self.Get("pod") != fullname+"-x7k2p" {
				t.Errorf("self metric %s; want the exporter pod (no pod label of its own)", self)
			}

			ep.HonorLabels = false
			got = scrapeThroughPrometheus(t, kind, ep)
			if held := got["cupti_sm_active_ratio/0"]; held.Get("pod") != fullname+"-x7k2p" || held.Get("exported_pod") != "trainer-0" {
				t.Errorf("honorLabels false: %s; the guarded failure (exporter pod wins, owner in exported_pod) did not show: the test cannot fail", held)
			}
		})
	}
}
