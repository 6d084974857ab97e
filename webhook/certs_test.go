package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const testDNS = "gpu-cupti-exporter-webhook.monitoring.svc"

var testPolicy = certPolicy{dnsNames: []string{testDNS}, caValidity: 300 * time.Hour, servingValidity: 30 * time.Hour}

// verify checks that b's serving certificate chains to its CA bundle for the DNS name at now.
func verify(t *testing.T, b Bundle, now time.Time) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.CACerts) {
		t.Fatal("no CA in the bundle")
	}
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: testDNS, Roots: pool, CurrentTime: now}); err != nil {
		t.Fatalf("serving certificate does not verify: %v", err)
	}
	return pair.Leaf
}

func countCerts(b []byte) int {
	n := 0
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return n
		}
		n++
	}
}

func TestRenewLifecycle(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b, err := testPolicy.renew(Bundle{}, t0)
	if err != nil {
		t.Fatal(err)
	}
	first := verify(t, b, t0)
	// Nothing due: unchanged, byte for byte (no needless Secret writes).
	if again, _ := testPolicy.renew(b, t0.Add(time.Hour)); !again.equal(b) {
		t.Fatal("a fresh bundle was renewed")
	}
	// A third of the serving lifetime left (30 h): a new serving certificate, same CA.
	t1 := t0.Add(21 * time.Hour)
	b1, _ := testPolicy.renew(b, t1)
	if string(b1.CACerts) != string(b.CACerts) || string(b1.Cert) == string(b.Cert) {
		t.Fatal("serving certificate not renewed alone")
	}
	verify(t, b1, t1)
	// A third of the CA lifetime left: a new CA, the old one kept in the bundle, so the
	// certificate another replica still serves verifies against it.
	t2 := t0.Add(201 * time.Hour)
	b2, _ := testPolicy.renew(b1, t2)
	if countCerts(b2.CACerts) != 2 {
		t.Fatalf("%d CAs in the bundle; want the new and the old", countCerts(b2.CACerts))
	}
	leaf := verify(t, b2, t2)
	if leaf.Issuer.CommonName == first.Issuer.CommonName {
		t.Error("serving certificate not re-issued by the new CA")
	}
	stale := Bundle{CACerts: b2.CACerts, Cert: b1.Cert, Key: b1.Key}
	verify(t, stale, t1.Add(time.Hour)) // signed by the old CA, trusted through the bundle
	// Once the old CA expires it leaves the bundle.
	t3 := t0.Add(301 * time.Hour)
	b3, _ := testPolicy.renew(b2, t3)
	if countCerts(b3.CACerts) != 1 {
		t.Errorf("%d CAs after the old one expired", countCerts(b3.CACerts))
	}
	verify(t, b3, t3)
	// A bundle that lost its serving certificate, or one for other names, is re-issued.
	other := certPolicy{dnsNames: []string{"other.svc"}, caValidity: testPolicy.caValidity, servingValidity: testPolicy.servingValidity}
	if b4, _ := other.renew(b3, t3); string(b4.Cert) == string(b3.Cert) || string(b4.CACerts) != string(b3.CACerts) {
		t.Error("a certificate for other names was kept")
	}
	if b5, _ := testPolicy.renew(Bundle{CACerts: b3.CACerts, CAKey: b3.CAKey}, t3); b5.Cert == nil {
		t.Error("no serving certificate issued")
	}
	// Garbage (a hand-edited Secret) starts over.
	if b6, err := testPolicy.renew(Bundle{CACerts: []byte("junk"), CAKey: []byte("junk")}, t3); err != nil {
		t.Error(err)
	} else {
		verify(t, b6, t3)
	}
}

func rotatorFixture() *fake.Clientset {
	ignore := admissionregistrationv1.Ignore
	return fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls", Namespace: "monitoring"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "wh"},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "pods.webhook.cupti-exporter.io", FailurePolicy: &ignore}},
		})
}

// TestCertRotatorReplicas: the first replica fills the chart's empty Secret and patches the
// bundle; the second adopts both without writing; a rotation reaches both.
func TestCertRotatorReplicas(t *testing.T) {
	client := rotatorFixture()
	now := time.Now()
	clock := func() time.Time { return now }
	cfg := CertRotatorConfig{Namespace: "monitoring", Secret: "tls", WebhookConfiguration: "wh", DNSNames: []string{testDNS},
		CAValidity: 300 * time.Hour, ServingValidity: 30 * time.Hour, Now: clock}
	a, err := NewCertRotator(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewCertRotator(client, cfg)
	ctx := context.Background()
	for _, r := range []*CertRotator{a, b} {
		if err := r.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a.rotations.Load() != 1 || b.rotations.Load() != 0 {
		t.Errorf("writes: a %d, b %d; want 1, 0", a.rotations.Load(), b.rotations.Load())
	}
	bundle := func() Bundle {
		s, err := client.CoreV1().Secrets("monitoring").Get(ctx, "tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return bundleOf(s.Data)
	}
	caBundle := func() []byte {
		c, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "wh", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Webhooks[0].ClientConfig.CABundle
	}
	if string(caBundle()) != string(bundle().CACerts) {
		t.Fatal("caBundle is not the Secret's CA")
	}
	serving := func(r *CertRotator) []byte {
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	if string(serving(a)) != string(serving(b)) {
		t.Error("replicas serve different certificates")
	}
	verify(t, bundle(), now)

	now = now.Add(21 * time.Hour) // serving certificate due
	_ = b.Reconcile(ctx)
	_ = a.Reconcile(ctx)
	if b.rotations.Load() != 1 || a.rotations.Load() != 1 {
		t.Errorf("after renewal: writes a %d, b %d; want 1, 1", a.rotations.Load(), b.rotations.Load())
	}
	if string(serving(a)) != string(serving(b)) {
		t.Error("replicas serve different certificates after a renewal")
	}
	pair, _ := a.GetCertificate(nil)
	if time.Until(pair.Leaf.NotAfter) < 40*time.Hour {
		t.Errorf("renewed certificate expires at %v", pair.Leaf.NotAfter)
	}
	// The configuration lost its bundle (a helm upgrade --force): put back.
	c, _ := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "wh", metav1.GetOptions{})
	c.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = b.Reconcile(ctx)
	if string(caBundle()) != string(bundle().CACerts) {
		t.Error("a lost caBundle was not restored")
	}
}

func TestCertRotatorMissingConfiguration(t *testing.T) {
	client := fake.NewClientset()
	r, _ := NewCertRotator(client, CertRotatorConfig{Namespace: "monitoring", Secret: "tls", WebhookConfiguration: "wh", DNSNames: []string{testDNS}})
	if err := r.Reconcile(context.Background()); err == nil {
		t.Fatal("no error without the MutatingWebhookConfiguration")
	}
	// It still serves (nothing to lose at start) and counts the failure.
	if !r.Ready() || r.errors.Load() != 1 {
		t.Errorf("ready %v, errors %d", r.Ready(), r.errors.Load())
	}
}
