package helm

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The cert-manager.io/v1 fields the chart renders (webhook.certManager), typed so that the
// strict decode refuses a misplaced one. Field names as cert-manager's API reference gives
// them (Issuer: spec.selfSigned; Certificate: spec.secretName, dnsNames, issuerRef).

type certManagerIssuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct {
			CRLDistributionPoints []string `json:"crlDistributionPoints,omitempty"`
		} `json:"selfSigned,omitempty"`
	} `json:"spec"`
}

type certManagerCertificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		IssuerRef  struct {
			Name  string `json:"name"`
			Kind  string `json:"kind,omitempty"`
			Group string `json:"group,omitempty"`
		} `json:"issuerRef"`
	} `json:"spec"`
}
