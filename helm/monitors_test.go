package helm

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// scrapeAuth is the prometheus-operator configuration a secured exporter needs, as a
// user would write it in values.
const scrapeAuth = `
  tlsConfig:
    ca: {secret: {name: cupti-web-tls, key: ca.crt}}
    cert: {secret: {name: cupti-web-tls, key: client.crt}}
    keySecret: {name: cupti-web-tls, key: client.key}
    serverName: cupti-exporter.monitoring.svc
    minVersion: TLS12
  basicAuth:
    username: {name: cupti-scrape, key: username}
    password: {name: cupti-scrape, key: password}
  relabelings:
    - {sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: host}
  metricRelabelings:
    - {sourceLabels: [__name__], regex: go_.*, action: drop}
`

// wantEndpoint is scrapeAuth as the strict decoder reads it.
func wantEndpoint(t *testing.T) endpointCommon {
	t.Helper()
	var e endpointCommon
	if err := yaml.Unmarshal([]byte(scrapeAuth), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestServiceMonitorTLSAndAuth(t *testing.T) {
	ms, _ := render(t, "web: {configSecret: cupti-web}\nserviceMonitor:\n  enabled: true"+scrapeAuth)
	objs := decodeAll(t, ms)
	ep := objs["ServiceMonitor/"+fullname].(*serviceMonitor).Spec.Endpoints[0]
	want := wantEndpoint(t)
	if ep.Scheme != "https" || !ep.HonorLabels {
		t.Errorf("scheme %q honorLabels %v; want https, true", ep.Scheme, ep.HonorLabels)
	}
	if ep.TLSConfig == nil || ep.TLSConfig.CA == nil || ep.TLSConfig.CA.Secret.Key != "ca.crt" || ep.TLSConfig.KeySecret.Key != "client.key" ||
		*ep.TLSConfig.ServerName != "cupti-exporter.monitoring.svc" || *ep.TLSConfig.MinVersion != "TLS12" {
		t.Errorf("tlsConfig %+v not passed through", ep.TLSConfig)
	}
	if !reflect.DeepEqual(ep.BasicAuth, want.BasicAuth) {
		t.Errorf("basicAuth %+v; want %+v", ep.BasicAuth, want.BasicAuth)
	}
	if len(ep.Relabelings) != 2 || ep.Relabelings[0].TargetLabel != "node" || !reflect.DeepEqual(ep.Relabelings[1], want.Relabelings[0]) {
		t.Errorf("relabelings %+v; want the chart's node label, then the user's", ep.Relabelings)
	}
	if !reflect.DeepEqual(ep.MetricRelabelings, want.MetricRelabelings) {
		t.Errorf("metricRelabelings %+v", ep.MetricRelabelings)
	}

	// Bearer authorization instead of basic auth; basic auth alone (no TLS) keeps http.
	ms, _ = render(t, "web: {configSecret: cupti-web, tls: false}\nserviceMonitor: {enabled: true, authorization: {type: Bearer, credentials: {name: tok, key: token}}}")
	ep = decodeAll(t, ms)["ServiceMonitor/"+fullname].(*serviceMonitor).Spec.Endpoints[0]
	if ep.Scheme != "http" || ep.Authorization == nil || ep.Authorization.Credentials.Name != "tok" || ep.TLSConfig != nil || ep.BasicAuth != nil {
		t.Errorf("endpoint %+v; want http with only the bearer authorization", ep)
	}
}

func TestPodMonitorTLSAndAuth(t *testing.T) {
	for _, tc := range []struct{ mode, scheme, port string }{{"node", "https", "metrics"}, {"sidecar", "", "cupti-metrics"}} {
		t.Run(tc.mode, func(t *testing.T) {
			ms, _ := render(t, "mode: "+tc.mode+"\nweb: {configSecret: cupti-web}\npodMonitor:\n  enabled: true"+scrapeAuth)
			pm := decodeAll(t, ms)["PodMonitor/"+fullname].(*podMonitor)
			ep := pm.Spec.PodMetricsEndpoints[0]
			want := wantEndpoint(t)
			if ep.Port != tc.port || ep.Scheme != tc.scheme || !ep.HonorLabels {
				t.Errorf("port %q scheme %q honorLabels %v; want %q %q true", ep.Port, ep.Scheme, ep.HonorLabels, tc.port, tc.scheme)
			}
			if ep.TLSConfig == nil || ep.TLSConfig.Cert == nil || ep.TLSConfig.Cert.Secret.Key != "client.crt" {
				t.Errorf("tlsConfig %+v not passed through", ep.TLSConfig)
			}
			if !reflect.DeepEqual(ep.BasicAuth, want.BasicAuth) || len(ep.Relabelings) != 2 || len(ep.MetricRelabelings) != 1 {
				t.Errorf("endpoint %+v", ep)
			}
		})
	}
}

func TestSchemaScrapeOptions(t *testing.T) {
	c := loadChart(t)
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{"serviceMonitor: {tlsConfig: {ca: cupti-ca}}", []string{"/serviceMonitor/tlsConfig/ca"}},
		{"serviceMonitor: {tlsConfig: {insecure_skip_verify: true}}", []string{"/serviceMonitor/tlsConfig", "insecure_skip_verify"}},
		{"serviceMonitor: {tlsConfig: {minVersion: TLS1.2}}", []string{"/serviceMonitor/tlsConfig/minVersion"}},
		{"serviceMonitor: {basicAuth: {username: admin}}", []string{"/serviceMonitor/basicAuth/username"}},
		{"serviceMonitor: {basicAuth: {username: {name: a}}}", []string{"/serviceMonitor/basicAuth/username", "key"}},
		{"podMonitor: {authorization: {type: Bearer, credentials: token}}", []string{"/podMonitor/authorization/credentials"}},
		{"podMonitor: {relabelings: [{source_labels: [a]}]}", []string{"/podMonitor/relabelings/0", "source_labels"}},
		{"serviceMonitor: {metricRelabelings: [{action: rename}]}", []string{"/serviceMonitor/metricRelabelings/0/action"}},
		{"web: {healthPort: 0}", []string{"/web/healthPort"}},
		{"web: {enablePMSamplingAPI: \"on\"}", []string{"/web/enablePMSamplingAPI"}},
		{"kubernetes: {podInformer: {enable: false}}", []string{"/kubernetes/podInformer", "enable"}},
	} {
		_, err := renderYAML(t, c, tc.values)
		if err == nil {
			t.Errorf("values %q: accepted; want a schema error", tc.values)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("values %q: error does not mention %q:\n%v", tc.values, w, err)
			}
		}
	}
}

func TestPodInformerOff(t *testing.T) {
	for _, values := range []string{"kubernetes: {podInformer: {enabled: false}, resourceSlices: {enabled: false}}", "mode: sidecar\npodMonitor: {enabled: true}"} {
		ms, _ := render(t, values)
		for _, k := range kinds(ms) {
			if strings.HasPrefix(k, "ClusterRole") {
				t.Errorf("values %q rendered %s; want no RBAC", values, k)
			}
		}
		for _, m := range ms {
			if ds, ok := decodeStrict(t, m).(*appsv1.DaemonSet); ok {
				if tok := ds.Spec.Template.Spec.AutomountServiceAccountToken; tok == nil || *tok {
					t.Errorf("values %q: token mounted without the pod informer", values)
				}
			}
		}
	}
}

func TestHealthPortMustDiffer(t *testing.T) {
	_, err := renderValues(t, loadChart(t), map[string]any{"web": map[string]any{"port": 9478}})
	if err == nil || !strings.Contains(err.Error(), "web.healthPort must differ from web.port") {
		t.Errorf("err = %v; want a refusal of one port for both listeners", err)
	}
}

func TestPMSamplingAPIValue(t *testing.T) {
	ms, _ := render(t, "web: {enablePMSamplingAPI: true}")
	ds := decodeAll(t, ms)["DaemonSet/"+fullname].(*appsv1.DaemonSet)
	wantArgs(t, container(t, ds.Spec.Template.Spec, "exporter", false), "--web.enable-pm-sampling-api")
	ms, _ = render(t, "web: {enablePMSamplingAPI: true}\npmsample: {enabled: false}")
	ds = decodeAll(t, ms)["DaemonSet/"+fullname].(*appsv1.DaemonSet)
	noArgPrefix(t, container(t, ds.Spec.Template.Spec, "exporter", false), "--web.enable-pm-sampling-api")
}

// TestEveryModeDecodesStrictly renders every mode and the secured variants and decodes
// each manifest strictly into its Kubernetes or prometheus-operator type (unknown or
// misplaced fields fail), with the pod-spec checks of decode_test.go.
func TestEveryModeDecodesStrictly(t *testing.T) {
	all := "prometheusRule: {enabled: true}\n"
	for name, values := range map[string]string{
		"node defaults":            "",
		"node custom":              nodeCustom,
		"node servicemonitor+auth": all + "web: {configSecret: s, enablePMSamplingAPI: true}\nserviceMonitor:\n  enabled: true" + scrapeAuth,
		"node podmonitor+auth":     all + "web: {configSecret: s}\npodMonitor:\n  enabled: true" + scrapeAuth,
		"node no informer":         all + "kubernetes: {podInformer: {enabled: false}}\nserviceAccount: {create: false, name: gpu}",
		"sidecar":                  "mode: sidecar",
		"sidecar podmonitor+auth":  all + "mode: sidecar\npodMonitor:\n  enabled: true" + scrapeAuth,
	} {
		t.Run(name, func(t *testing.T) {
			ms, _ := render(t, values)
			decodeAll(t, ms)
		})
	}
	c := loadParent(t)
	for _, values := range []string{"", "cupti-exporter: {mode: node, podMonitor: {enabled: false}, serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}"} {
		ms, err := installDryRun(t, c, values)
		if err != nil {
			t.Fatalf("parent chart with %q: %v", values, err)
		}
		got := decodeAll(t, ms)
		if !slices.ContainsFunc(ms, func(m manifest) bool { return m.Kind == "Job" }) || len(got) != len(ms) {
			t.Errorf("parent chart with %q rendered %v", values, kinds(ms))
		}
	}
}
