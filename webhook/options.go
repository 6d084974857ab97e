package webhook

import (
	"fmt"
	"log/slog"
)

// Option configures a Mutator or a Server.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	gpuResources       []string
	excluded           map[string]bool
	ownLabels          map[string]string
	defaultPodSecurity string
	sidecarUser        int64
	sidecarOnly        bool
	logger             *slog.Logger
}

func newOptions(opts []Option) (options, error) {
	o := options{
		gpuResources:       DefaultGPUResources,
		excluded:           map[string]bool{"kube-system": true},
		defaultPodSecurity: "privileged",
		sidecarUser:        65532,
		logger:             slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if len(o.gpuResources) == 0 {
		return o, fmt.Errorf("webhook: no GPU resource names")
	}
	switch o.defaultPodSecurity {
	case "privileged", "baseline", "restricted":
	default:
		return o, fmt.Errorf("webhook: Pod Security level %q: want privileged, baseline or restricted", o.defaultPodSecurity)
	}
	if o.sidecarUser <= 0 {
		return o, fmt.Errorf("webhook: sidecar user %d: want a non-root UID", o.sidecarUser)
	}
	return o, nil
}

// WithGPUResources sets the resource names that mark a GPU container (a trailing "*"
// matches a prefix); default DefaultGPUResources. An empty list keeps the default.
func WithGPUResources(names []string) Option {
	return optionFunc(func(o *options) {
		if len(names) > 0 {
			o.gpuResources = names
		}
	})
}

// WithExcludedNamespaces adds namespaces whose pods are never wired (kube-system always is).
func WithExcludedNamespaces(names []string) Option {
	return optionFunc(func(o *options) {
		for _, n := range names {
			o.excluded[n] = true
		}
	})
}

// WithOwnLabels sets the labels of the exporter's own pods, which are never wired.
func WithOwnLabels(labels map[string]string) Option {
	return optionFunc(func(o *options) { o.ownLabels = labels })
}

// WithDefaultPodSecurity sets the level assumed for namespaces without the
// pod-security.kubernetes.io/enforce label: the cluster's default (privileged unless the
// API server's admission configuration says otherwise).
func WithDefaultPodSecurity(level string) Option {
	return optionFunc(func(o *options) { o.defaultPodSecurity = level })
}

// WithSidecarUser sets the UID the injected sidecar containers run as when their
// securityContext sets none (default 65532).
func WithSidecarUser(uid int64) Option {
	return optionFunc(func(o *options) { o.sidecarUser = uid })
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l != nil {
			o.logger = l
		}
	})
}

// WithSidecarOnly wires every pod with the sidecar, whatever its namespace allows: for
// clusters without the node DaemonSet (the chart's sidecar mode).
func WithSidecarOnly(on bool) Option {
	return optionFunc(func(o *options) { o.sidecarOnly = on })
}
