package helm

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Minimal copies of the prometheus-operator (monitoring.coreos.com/v1) types, with only
// the fields the chart may render, so a strict decode rejects a misspelt or misplaced
// field. Field names follow the operator's CRDs.

type relabelConfig struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      uint64   `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

type namespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// secretKeySelector is core/v1 SecretKeySelector (also used for ConfigMap keys here).
type secretKeySelector struct {
	Name     string `json:"name,omitempty"`
	Key      string `json:"key"`
	Optional *bool  `json:"optional,omitempty"`
}

type secretOrConfigMap struct {
	Secret    *secretKeySelector `json:"secret,omitempty"`
	ConfigMap *secretKeySelector `json:"configMap,omitempty"`
}

// tlsConfig is the operator's TLSConfig (SafeTLSConfig plus the file fields, which only
// ServiceMonitors accept; podMonitor's decode rejects them through safeTLSConfig).
type tlsConfig struct {
	safeTLSConfig `json:",inline"`
	CAFile        string `json:"caFile,omitempty"`
	CertFile      string `json:"certFile,omitempty"`
	KeyFile       string `json:"keyFile,omitempty"`
}

type safeTLSConfig struct {
	CA                 *secretOrConfigMap `json:"ca,omitempty"`
	Cert               *secretOrConfigMap `json:"cert,omitempty"`
	KeySecret          *secretKeySelector `json:"keySecret,omitempty"`
	ServerName         *string            `json:"serverName,omitempty"`
	InsecureSkipVerify *bool              `json:"insecureSkipVerify,omitempty"`
	MinVersion         *string            `json:"minVersion,omitempty"`
	MaxVersion         *string            `json:"maxVersion,omitempty"`
}

type basicAuth struct {
	Username secretKeySelector `json:"username"`
	Password secretKeySelector `json:"password"`
}

type safeAuthorization struct {
	Type        string             `json:"type,omitempty"`
	Credentials *secretKeySelector `json:"credentials,omitempty"`
}

// endpointCommon holds the fields ServiceMonitor endpoints and PodMonitor
// podMetricsEndpoints share.
type endpointCommon struct {
	Port              string             `json:"port"`
	Path              string             `json:"path,omitempty"`
	Scheme            string             `json:"scheme,omitempty"`
	Interval          string             `json:"interval,omitempty"`
	ScrapeTimeout     string             `json:"scrapeTimeout,omitempty"`
	HonorLabels       bool               `json:"honorLabels,omitempty"`
	BasicAuth         *basicAuth         `json:"basicAuth,omitempty"`
	Authorization     *safeAuthorization `json:"authorization,omitempty"`
	Relabelings       []relabelConfig    `json:"relabelings,omitempty"`
	MetricRelabelings []relabelConfig    `json:"metricRelabelings,omitempty"`
}

type endpoint struct {
	endpointCommon `json:",inline"`
	TLSConfig      *tlsConfig `json:"tlsConfig,omitempty"`
}

type podMetricsEndpoint struct {
	endpointCommon `json:",inline"`
	TLSConfig      *safeTLSConfig `json:"tlsConfig,omitempty"`
}

type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector namespaceSelector    `json:"namespaceSelector,omitempty"`
		Endpoints         []endpoint           `json:"endpoints"`
	} `json:"spec"`
}

type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel            string               `json:"jobLabel,omitempty"`
		Selector            metav1.LabelSelector `json:"selector"`
		NamespaceSelector   namespaceSelector    `json:"namespaceSelector,omitempty"`
		PodMetricsEndpoints []podMetricsEndpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}
