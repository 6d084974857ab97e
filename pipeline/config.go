package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
	"github.com/cupti-exporter/cupti-exporter/mapping"

	"github.com/cupti-exporter/cupti-exporter/activity/receiver"
	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/gpmsource"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/idle"
	"github.com/cupti-exporter/cupti-exporter/internal/strictyaml"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/profilers"
)

// Config is everything `serve` (and `replay`, `record`) can be told, from the YAML file
// given with --config.file and from flags. Each leaf has a flag of the same dotted name,
// with '_' written '-' (pmsample.decode_period is --pmsample.decode-period) unless a flag
// tag names it (web.config_file is --web.config.file, as in other exporters). Precedence:
// built-in default, then the YAML file, then flags given on the command line.
type Config struct {
	Web exporter.WebSettings `yaml:"web"`
	// The pmsample section is made of the parts of the packages that own its keys, in the
	// order its flags are listed.
	PMSample struct {
		pmsample.Config     `yaml:",inline"`
		Idle                idle.Config `yaml:",inline"`
		pmsample.LoopConfig `yaml:",inline"`
		Profilers           profilers.Config `yaml:",inline"`
	} `yaml:"pmsample"`
	CUPTI struct {
		Library string `yaml:"library" help:"Path to libcupti.so (or its folder); empty: search the usual places."`
	} `yaml:"cupti"`
	Activity    receiver.Config       `yaml:"activity"`
	Attribution attribution.Config    `yaml:"attribution"`
	OTLP        exporter.OTLPSettings `yaml:"otlp"`
	Kubelet     struct {
		PodResourcesSocket string `yaml:"pod_resources_socket" help:"Kubelet pod-resources socket for pod attribution of GPUs; empty: off."`
	} `yaml:"kubelet"`
	Kubernetes struct {
		PodInformer string `yaml:"pod_informer" help:"Attribute traced processes to pods from their cgroup through an informer of this node's pods: auto (on when KUBERNETES_SERVICE_HOST is set and the node name is known), on or off."`
		NodeName    string `yaml:"node_name" help:"This node's name, for the pod and ResourceSlice informers; empty: $NODE_NAME."`
		Kubeconfig  string `yaml:"kubeconfig" help:"Kubeconfig file for the pod and ResourceSlice informers (out of cluster); empty: the pod's service account."`
		// ResourceSlices: docs/kubernetes.md "GPUs allocated through DRA".
		ResourceSlices string `yaml:"resource_slices" help:"Map GPUs that NVIDIA's DRA driver (gpu.nvidia.com) allocates through ResourceClaims to their UUIDs, through an informer of this node's ResourceSlices, so that their device series carry the pod: auto (on with kubelet.pod_resources_socket, in a cluster or with a kubeconfig, and the node name known), on or off."`
	} `yaml:"kubernetes"`
	Series struct {
		Extra []string `yaml:"extra" help:"Series an idle GPU does without by default, turned back on by group (comma separated): window_min (the PM _min_ratio gauges), zero_reasons (loss, drop and failure reasons, sampling states and NVML clock-event reasons and times at 0 before their first event), sampler_timing (the PM decode path's timings and the decode-gap histogram), nvml_detail (BAR1, free and reserved memory, copy and codec utilisation, MIG mode, lifetime ECC counts, the graphics clock and the non-SM maximum clocks); all: every one (docs/sizing.md)."`
	} `yaml:"series"`
	Mapping mapping.Config   `yaml:"mapping"`
	Health  health.Config    `yaml:"health"`
	GPM     gpmsource.Config `yaml:"gpm"`
}

// DefaultConfig is the built-in configuration.
func DefaultConfig() Config {
	var c Config
	c.Web = exporter.DefaultWebSettings()
	c.PMSample.Config = pmsample.DefaultConfig()
	c.PMSample.Idle = idle.DefaultConfig()
	c.PMSample.LoopConfig = pmsample.DefaultLoopConfig()
	c.PMSample.Profilers = profilers.DefaultConfig()
	c.Activity = receiver.DefaultConfig()
	c.OTLP = exporter.DefaultOTLPSettings()
	c.Health = health.DefaultConfig()
	c.GPM = gpmsource.DefaultConfig()
	c.Attribution = attribution.DefaultConfig()
	c.Kubernetes.PodInformer = "auto"
	c.Kubernetes.ResourceSlices = "auto"
	c.Series.Extra = []string{}
	return c
}

// Validate checks values that flags and YAML both accept but the exporter cannot use.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.PMSample.Config.Validate()...)
	errs = append(errs, c.PMSample.Idle.Validate()...)
	errs = append(errs, c.PMSample.LoopConfig.Validate()...)
	errs = append(errs, c.PMSample.Profilers.Validate()...)
	errs = append(errs, c.Health.Validate()...)
	errs = append(errs, c.Activity.Validate()...)
	errs = append(errs, c.OTLP.Validate()...)
	errs = append(errs, c.Attribution.Validate()...)
	decodePeriod := settings.Duration(pmsample.DecodePeriodFor(time.Duration(c.PMSample.Interval), time.Duration(c.PMSample.DecodePeriod)))
	if c.Attribution.Watermark == settings.Duration(attribution.DefaultWatermark) && c.Attribution.Watermark <= decodePeriod {
		// the default follows a long decode period: samples arrive a decode period late
		c.Attribution.Watermark = 2*decodePeriod + settings.Duration(time.Second)
	}
	if c.Attribution.Enabled && c.Attribution.Watermark <= decodePeriod {
		errs = append(errs, fmt.Errorf("attribution.watermark (%s) must be longer than pmsample.decode_period (%s): samples arrive a decode period late, and their records later still", c.Attribution.Watermark, decodePeriod))
	}
	errs = append(errs, c.validateBudget()...)
	errs = append(errs, c.GPM.Validate()...)
	switch c.Kubernetes.PodInformer {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("kubernetes.pod_informer must be auto, on or off, got %q", c.Kubernetes.PodInformer))
	}
	switch c.Kubernetes.ResourceSlices {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("kubernetes.resource_slices must be auto, on or off, got %q", c.Kubernetes.ResourceSlices))
	}
	errs = append(errs, c.Web.Validate()...)
	return errors.Join(errs...)
}

// MaxConfigBytes bounds a configuration file: the YAML decoder holds several times a file's
// size (a 200 MB file took 1.43 GB), and a real configuration is a few KiB.
const MaxConfigBytes = 1 << 20

// LoadConfigFile reads a YAML configuration over c. Unknown keys are errors.
func LoadConfigFile(path string, c *Config) error {
	data, err := strictyaml.ReadFile(path, MaxConfigBytes, "a configuration file")
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	return ParseConfig(data, path, c)
}

// ParseConfig decodes YAML over c; errors name the file, the line, the key's dotted
// path and what it takes, and for an unknown key the nearest valid one.
func ParseConfig(data []byte, path string, c *Config) error {
	if err := strictyaml.Decode(data, c); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}
