package podresources

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// DefaultSocket is where the kubelet serves the PodResources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// DefaultResources are the extended resource names whose devices are GPUs. A trailing
// "*" matches any suffix.
var DefaultResources = []string{"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"}

// Option configures a Client.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	interval     time.Duration
	timeout      time.Duration
	maxStaleness time.Duration
	resources    []string
	resolve      DeviceResolver
	logger       *slog.Logger
	now          func() time.Time
}

// WithRefreshInterval sets how often the device map is refreshed (default 10 s).
// A non-positive value keeps the default.
func WithRefreshInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.interval = d
		}
	})
}

// WithTimeout bounds each kubelet call (default 2 s, never more than the refresh
// interval). A non-positive value keeps the default.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	})
}

// WithMaxStaleness sets how long the last good map is kept while refreshes fail
// (default 6 refresh intervals). After that Lookup finds nothing until the kubelet
// answers again. A non-positive value keeps the default.
func WithMaxStaleness(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.maxStaleness = d
		}
	})
}

// WithResources replaces DefaultResources. A trailing "*" matches any suffix.
func WithResources(names ...string) Option {
	return optionFunc(func(c *config) { c.resources = append([]string(nil), names...) })
}

// WithDRA reads the devices NVIDIA's DRA driver (GPUDriver) allocated through
// ResourceClaims, from the DynamicResources of the kubelet's answer, and maps each to its
// GPU or MIG UUID with resolve. Without it such devices are counted
// (cupti_podresources_dra_devices{result="no_resource_slices"}) but not attributed.
func WithDRA(resolve DeviceResolver) Option {
	return optionFunc(func(c *config) { c.resolve = resolve })
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// withClock replaces time.Now in tests.
func withClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}

func newConfig(opts []Option) (config, error) {
	c := config{
		interval:  10 * time.Second,
		timeout:   2 * time.Second,
		resources: DefaultResources,
		logger:    slog.Default(),
		now:       time.Now,
	}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.timeout > c.interval {
		c.timeout = c.interval
	}
	if c.maxStaleness == 0 {
		c.maxStaleness = 6 * c.interval
	}
	if len(c.resources) == 0 {
		return c, fmt.Errorf("podresources: no resource names to match: pass at least one to WithResources")
	}
	for _, r := range c.resources {
		if r == "" || strings.Contains(strings.TrimSuffix(r, "*"), "*") {
			return c, fmt.Errorf("podresources: resource name %q: want a name, optionally ending in *", r)
		}
	}
	return c, nil
}

// matches reports whether resource is one of the configured GPU resources.
func (c *config) matches(resource string) bool {
	for _, r := range c.resources {
		if p, ok := strings.CutSuffix(r, "*"); ok {
			if strings.HasPrefix(resource, p) {
				return true
			}
		} else if resource == r {
			return true
		}
	}
	return false
}
