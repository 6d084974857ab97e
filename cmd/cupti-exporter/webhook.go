package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/internal/httplimit"
	"github.com/cupti-exporter/cupti-exporter/kubepods"
	"github.com/cupti-exporter/cupti-exporter/pipeline"
	"github.com/cupti-exporter/cupti-exporter/webhook"
)

const cmdWebhook = "webhook"

// webhookFlags are the settings of `cupti-exporter webhook` (flags only: the command runs
// from the chart's Deployment).
type webhookFlags struct {
	listen, healthListen string
	wiringFile           string
	gpuResources         []string
	excludeNamespaces    []string
	ownLabels            map[string]string
	defaultPodSecurity   string
	sidecarUser          int64
	nodeWiring           bool

	certFile, keyFile   string
	secret, namespace   string
	configuration       string
	dnsNames            []string
	ips                 []string
	servingValidity     time.Duration
	namespaceSyncWait   time.Duration
	certFileCheckPeriod time.Duration
}

func addWebhookCommand(app *kingpin.Application, f *webhookFlags) {
	c := app.Command(cmdWebhook, "Run the mutating admission webhook that wires the injection library into GPU pods (docs/kubernetes.md).")
	c.Flag("webhook.listen-address", "Address of the HTTPS admission endpoint (path /mutate).").Default(":9443").StringVar(&f.listen)
	c.Flag("webhook.health-listen-address", "Plain-HTTP address of /healthz, /readyz and /metrics.").Default(":9479").StringVar(&f.healthListen)
	c.Flag("webhook.wiring-file", "What the webhook adds to pods (the chart renders it).").Required().PlaceHolder("FILE").StringVar(&f.wiringFile)
	c.Flag("webhook.gpu-resources", "Resource names that mark a GPU container, comma-separated; a trailing * matches a prefix.").
		Default(strings.Join(webhook.DefaultGPUResources, ",")).SetValue((*listValue)(&f.gpuResources))
	c.Flag("webhook.exclude-namespaces", "Namespaces whose pods are never wired, comma-separated (kube-system always is).").SetValue((*listValue)(&f.excludeNamespaces))
	c.Flag("webhook.own-label", "A label of the exporter's own pods, which are never wired (repeatable; all must match).").PlaceHolder("NAME=VALUE").SetValue((*mapValue)(&f.ownLabels))
	c.Flag("webhook.default-pod-security", "Pod Security level assumed for namespaces without the pod-security.kubernetes.io/enforce label: privileged (node wiring), baseline or restricted (sidecar wiring).").
		Default("privileged").EnumVar(&f.defaultPodSecurity, "privileged", "baseline", "restricted")
	c.Flag("webhook.node-wiring", "Wire pods to the node DaemonSet's folder where Pod Security allows hostPath; off: always the sidecar (no DaemonSet).").Default("true").BoolVar(&f.nodeWiring)
	c.Flag("webhook.sidecar-user", "UID of the injected sidecar containers where they set none (non-root: Pod Security restricted).").Default("65532").Int64Var(&f.sidecarUser)
	c.Flag("webhook.tls.cert-file", "Serving certificate file kept by another tool (cert-manager); empty: the webhook keeps its own in --webhook.tls.secret.").PlaceHolder("FILE").StringVar(&f.certFile)
	c.Flag("webhook.tls.key-file", "Key of --webhook.tls.cert-file.").PlaceHolder("FILE").StringVar(&f.keyFile)
	c.Flag("webhook.tls.secret", "Secret holding the webhook's own CA and serving certificate (created and rotated by the webhook).").StringVar(&f.secret)
	c.Flag("webhook.tls.namespace", "Namespace of that Secret; default $POD_NAMESPACE.").StringVar(&f.namespace)
	c.Flag("webhook.tls.dns-names", "Names the serving certificate covers, comma-separated (SERVICE.NAMESPACE.svc).").SetValue((*listValue)(&f.dnsNames))
	c.Flag("webhook.tls.ip-addresses", "IP addresses the serving certificate covers, comma-separated (a webhook registered by URL).").SetValue((*listValue)(&f.ips))
	c.Flag("webhook.tls.serving-validity", "Lifetime of a serving certificate; renewed when a third is left.").Default("8760h").DurationVar(&f.servingValidity)
	c.Flag("webhook.configuration", "MutatingWebhookConfiguration whose caBundle the webhook keeps (with --webhook.tls.secret).").StringVar(&f.configuration)
	f.namespaceSyncWait = 10 * time.Second
	f.certFileCheckPeriod = 30 * time.Second
}

// runWebhook serves admissions until ctx ends.
func runWebhook(ctx context.Context, logger *slog.Logger, cfg *pipeline.Config, f *webhookFlags) error {
	logger = logger.With("source", "webhook")
	wiring, err := webhook.LoadConfig(f.wiringFile)
	if err != nil {
		return err
	}
	client, err := kubepods.NewClient(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return err
	}
	namespaces := webhook.NewNamespaces(client)
	mutator, err := webhook.NewMutator(wiring, namespaces,
		webhook.WithGPUResources(f.gpuResources), webhook.WithExcludedNamespaces(f.excludeNamespaces),
		webhook.WithOwnLabels(f.ownLabels), webhook.WithDefaultPodSecurity(f.defaultPodSecurity),
		webhook.WithSidecarUser(f.sidecarUser), webhook.WithSidecarOnly(!f.nodeWiring), webhook.WithLogger(logger))
	if err != nil {
		return err
	}
	certs, err := webhookCertificates(ctx, logger, client, f)
	if err != nil {
		return err
	}
	if err := webhookDescriptors(logger, f.healthListen != ""); err != nil {
		return err
	}
	server := webhook.NewServer(mutator, logger)
	conns := httplimit.NewMetrics("cupti_webhook")
	reg := prometheus.NewRegistry()
	reg.MustRegister(server, namespaces, certs, conns, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	namespaces.Start(ctx)
	go func() {
		// Admissions before the first list read namespaces from the API server.
		sctx, cancel := context.WithTimeout(ctx, f.namespaceSyncWait)
		defer cancel()
		if !namespaces.WaitForSync(sctx) && ctx.Err() == nil {
			logger.Warn("namespace cache not synced yet; reading namespaces from the API server meanwhile")
		}
	}()

	mux := http.NewServeMux()
	mux.Handle(webhook.MutatePath, server)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("webhook listener: %w", err)
	}
	httpsLn := httplimit.NewListener(ln, "https", webhookMaxConnections, conns)
	https := &http.Server{Handler: mux, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}}
	webhookHTTPS.Apply(https, httpsLn)

	health := http.NewServeMux()
	health.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	health.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !certs.Ready() {
			http.Error(w, "no serving certificate yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	health.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	var plain *http.Server
	errc := make(chan error, 2)
	if f.healthListen != "" {
		ln, err := net.Listen("tcp", f.healthListen)
		if err != nil {
			httpsLn.Close()
			return fmt.Errorf("health listener: %w", err)
		}
		healthLn := httplimit.NewListener(ln, "health", exporter.HealthMaxConnections, conns)
		plain = &http.Server{Handler: health, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
		webhookHealth.Apply(plain, healthLn)
		go func() { errc <- plain.Serve(healthLn) }()
	}
	go func() { errc <- https.ServeTLS(httpsLn, "", "") }()
	logger.Info("admission webhook listening", "address", httpsLn.Addr().String(), "wiring", f.wiringFile,
		"max_connections", webhookMaxConnections, "idle_timeout", webhookHTTPS.IdleTimeout)

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	serr := https.Shutdown(sctx)
	if plain != nil {
		serr = errors.Join(serr, plain.Shutdown(sctx))
	}
	if serr != nil {
		logger.Debug("webhook shutdown", "err", serr)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Connection bounds of the webhook's listeners (docs/security.md, "HTTP listeners").
const (
	// webhookMaxConnections is the most connections the HTTPS listener holds: the API
	// servers keep a few each (HTTP/2).
	webhookMaxConnections = 128
	// webhookOtherReserve is the descriptors kept for the rest: the Kubernetes API
	// connections, certificate files.
	webhookOtherReserve = 64
)

var (
	// webhookHTTPS bounds the admission listener. The API server gives a webhook 10 s by
	// default (timeoutSeconds, at most 30); its client closes idle connections after
	// 90 s, so the webhook waits longer, and a POST is never sent on a connection the
	// webhook is closing.
	webhookHTTPS = httplimit.Settings{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	// webhookHealth bounds the health listener (probes and a small /metrics).
	webhookHealth = httplimit.Settings{ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
)

// webhookDescriptors checks that the listeners' connections fit the descriptor limit.
func webhookDescriptors(logger *slog.Logger, health bool) error {
	limit, open, err := httplimit.Descriptors()
	if err != nil {
		return err
	}
	need := webhookMaxConnections + 1 + webhookOtherReserve
	if health {
		need += exporter.HealthMaxConnections + 1
	}
	if open+need > limit {
		return fmt.Errorf("the descriptor limit (RLIMIT_NOFILE) is %d: with %d open, the webhook's listeners and connections need %d more; raise the limit (ulimit -n, the container runtime's nofile)",
			limit, open, need)
	}
	logger.Debug("webhook descriptors", "nofile", limit, "open", open, "needed", need)
	return nil
}

// webhookCertificate serves TLS and reports its state.
type webhookCertificate interface {
	prometheus.Collector
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Ready() bool
}

// webhookCertificates starts the serving certificate: files kept by cert-manager, or the
// webhook's own Secret, reconciled once before serving (retried until it works or ctx ends)
// and then every minute.
func webhookCertificates(ctx context.Context, logger *slog.Logger, client kubernetes.Interface, f *webhookFlags) (webhookCertificate, error) {
	if f.certFile != "" || f.keyFile != "" {
		if f.certFile == "" || f.keyFile == "" {
			return nil, errors.New("--webhook.tls.cert-file and --webhook.tls.key-file go together")
		}
		files, err := webhook.NewCertFiles(f.certFile, f.keyFile, logger)
		if err != nil {
			return nil, fmt.Errorf("webhook certificate: %w", err)
		}
		go files.Run(ctx, f.certFileCheckPeriod)
		return files, nil
	}
	ns := f.namespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	var ips []net.IP
	for _, s := range f.ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("--webhook.tls.ip-addresses: %q is not an IP address", s)
		}
		ips = append(ips, ip)
	}
	rot, err := webhook.NewCertRotator(client, webhook.CertRotatorConfig{
		Namespace: ns, Secret: f.secret, WebhookConfiguration: f.configuration,
		DNSNames: f.dnsNames, IPs: ips, ServingValidity: f.servingValidity, Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (or --webhook.tls.cert-file with cert-manager)", err)
	}
	for {
		err := rot.Reconcile(ctx)
		if rot.Ready() {
			if err != nil {
				logger.Warn("webhook certificate", "err", err)
			}
			break
		}
		logger.Warn("no webhook certificate yet; retrying in 5 s", "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
	go rot.Run(ctx)
	return rot, nil
}
