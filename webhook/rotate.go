package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CertRotatorConfig names the objects a CertRotator keeps and the names its serving
// certificate covers.
type CertRotatorConfig struct {
	Namespace string // of the Secret
	Secret    string
	// WebhookConfiguration is the MutatingWebhookConfiguration whose webhooks get the CA
	// bundle.
	WebhookConfiguration string
	DNSNames             []string // e.g. name.namespace.svc
	IPs                  []net.IP
	// Zero: 10 years for the CA, 1 year for the serving certificate.
	CAValidity, ServingValidity time.Duration
	// Interval between checks; zero: 1 minute. A failed check is retried after 5 s.
	Interval time.Duration
	Logger   *slog.Logger
	Now      func() time.Time // tests
}

// CertRotator keeps a self-signed CA and a serving certificate in a Secret, renews them
// before they expire, and patches the CA bundle into the MutatingWebhookConfiguration
// before it serves a certificate the new CA signed. Replicas share the Secret: an update
// that loses a race (a conflict) is retried from the Secret the winner wrote.
type CertRotator struct {
	client kubernetes.Interface
	cfg    CertRotatorConfig
	policy certPolicy
	*certState
}

// NewCertRotator returns a rotator; Reconcile or Run load its first certificate.
func NewCertRotator(client kubernetes.Interface, cfg CertRotatorConfig) (*CertRotator, error) {
	if cfg.Namespace == "" || cfg.Secret == "" || cfg.WebhookConfiguration == "" {
		return nil, errors.New("webhook: the certificate's namespace, Secret and MutatingWebhookConfiguration are required")
	}
	if len(cfg.DNSNames) == 0 && len(cfg.IPs) == 0 {
		return nil, errors.New("webhook: the serving certificate needs a DNS name or an IP")
	}
	if cfg.CAValidity <= 0 {
		cfg.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if cfg.ServingValidity <= 0 {
		cfg.ServingValidity = 365 * 24 * time.Hour
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &CertRotator{client: client, cfg: cfg, certState: newCertState(),
		policy: certPolicy{dnsNames: cfg.DNSNames, ips: cfg.IPs, caValidity: cfg.CAValidity, servingValidity: cfg.ServingValidity}}, nil
}

// errRaced is a write that lost to another replica's.
var errRaced = errors.New("another replica changed it first")

// Reconcile renews what is due, writes the Secret, patches the CA bundle and loads the
// serving certificate. It retries lost races a few times.
func (r *CertRotator) Reconcile(ctx context.Context) error {
	var err error
	for range 5 {
		if err = r.reconcileOnce(ctx); !errors.Is(err, errRaced) {
			break
		}
	}
	if err != nil {
		r.errors.Add(1)
	}
	return err
}

func (r *CertRotator) reconcileOnce(ctx context.Context) error {
	secrets := r.client.CoreV1().Secrets(r.cfg.Namespace)
	s, err := secrets.Get(ctx, r.cfg.Secret, metav1.GetOptions{})
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return fmt.Errorf("reading Secret %s/%s: %w", r.cfg.Namespace, r.cfg.Secret, err)
	}
	var cur Bundle
	if !missing {
		cur = bundleOf(s.Data)
	}
	next, err := r.policy.renew(cur, r.cfg.Now())
	if err != nil {
		return err
	}
	if !next.equal(cur) {
		if err := r.writeSecret(ctx, s, missing, next); err != nil {
			return err
		}
		r.rotations.Add(1)
		r.cfg.Logger.Info("webhook certificate written", "secret", r.cfg.Namespace+"/"+r.cfg.Secret)
	}
	if err := r.patchCABundle(ctx, next.CACerts); err != nil {
		if r.current.Load() != nil {
			// Keep serving the certificate the registered bundle trusts.
			return err
		}
		r.cfg.Logger.Warn("serving a certificate the webhook configuration may not trust yet", "err", err)
		if lerr := r.load(next.Cert, next.Key); lerr != nil {
			return lerr
		}
		return err
	}
	return r.load(next.Cert, next.Key)
}

func (r *CertRotator) writeSecret(ctx context.Context, s *corev1.Secret, missing bool, b Bundle) error {
	secrets := r.client.CoreV1().Secrets(r.cfg.Namespace)
	var err error
	if missing {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: r.cfg.Secret, Namespace: r.cfg.Namespace},
			Data:       b.data(),
		}, metav1.CreateOptions{})
	} else {
		s = s.DeepCopy()
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		for k, v := range b.data() {
			s.Data[k] = v
		}
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return errRaced
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", r.cfg.Namespace, r.cfg.Secret, err)
	}
	return nil
}

// patchCABundle sets caBundle on every webhook of the configuration that lacks it.
func (r *CertRotator) patchCABundle(ctx context.Context, bundle []byte) error {
	api := r.client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	c, err := api.Get(ctx, r.cfg.WebhookConfiguration, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", r.cfg.WebhookConfiguration, err)
	}
	changed := false
	for i := range c.Webhooks {
		if !bytes.Equal(c.Webhooks[i].ClientConfig.CABundle, bundle) {
			c.Webhooks[i].ClientConfig.CABundle = bundle
			changed = true
		}
	}
	if !changed {
		return nil
	}
	if _, err := api.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return errRaced
		}
		return fmt.Errorf("patching the CA bundle of %s: %w", r.cfg.WebhookConfiguration, err)
	}
	r.cfg.Logger.Info("CA bundle patched", "mutatingwebhookconfiguration", r.cfg.WebhookConfiguration)
	return nil
}

// Run reconciles every Interval (5 s after a failure) until ctx ends.
func (r *CertRotator) Run(ctx context.Context) {
	for {
		wait := r.cfg.Interval
		if err := r.Reconcile(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("webhook certificate", "err", err)
			wait = 5 * time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// certState is the certificate being served and its self-metrics; GetCertificate reads it
// on every handshake.
type certState struct {
	current   atomic.Pointer[tls.Certificate]
	rotations atomic.Uint64
	errors    atomic.Uint64
}

func newCertState() *certState { return &certState{} }

func (c *certState) load(certPEM, keyPEM []byte) error {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("loading the serving certificate: %w", err)
	}
	c.current.Store(&pair)
	return nil
}

// GetCertificate serves the current certificate (tls.Config.GetCertificate).
func (c *certState) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if p := c.current.Load(); p != nil {
		return p, nil
	}
	return nil, errors.New("no serving certificate yet")
}

// Ready reports whether a certificate is loaded.
func (c *certState) Ready() bool { return c.current.Load() != nil }

var (
	certExpiry = prometheus.NewDesc("cupti_webhook_certificate_expiry_timestamp_seconds",
		"When the serving certificate expires (Unix time); absent before one is loaded.", nil, nil)
	certRotations = prometheus.NewDesc("cupti_webhook_certificate_rotations_total",
		"Certificates this replica wrote to the Secret (or reloaded from files).", nil, nil)
	certErrors = prometheus.NewDesc("cupti_webhook_certificate_errors_total",
		"Failed certificate checks (reading or writing the Secret, patching the CA bundle, reading the files).", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *certState) Describe(ch chan<- *prometheus.Desc) {
	ch <- certExpiry
	ch <- certRotations
	ch <- certErrors
}

// Collect implements prometheus.Collector.
func (c *certState) Collect(ch chan<- prometheus.Metric) {
	if p := c.current.Load(); p != nil && p.Leaf != nil {
		ch <- prometheus.MustNewConstMetric(certExpiry, prometheus.GaugeValue, float64(p.Leaf.NotAfter.Unix()))
	}
	ch <- prometheus.MustNewConstMetric(certRotations, prometheus.CounterValue, float64(c.rotations.Load()))
	ch <- prometheus.MustNewConstMetric(certErrors, prometheus.CounterValue, float64(c.errors.Load()))
}
