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
	Web      exporter.WebSettings `yaml:"web"`
	PMSample struct {
		Enabled      bool              `yaml:"enabled" help:"Sample device counters with CUPTI PM Sampling."`
		Interval     settings.Duration `yaml:"interval" help:"Hardware sampling interval (GPU time), 100us to 1s."`
		DecodePeriod settings.Duration `yaml:"decode_period" help:"How often the hardware buffer is decoded, 10ms to 10s and at most 20000 sampling intervals."`
		Metrics      []string          `yaml:"metrics" help:"Perfworks metrics to sample (comma separated); empty: the curated set."`
		MetricSet    string            `yaml:"metric_set" help:"Named single-pass metric set of CUPTI 13.2+ (listed by metrics plan) instead of pmsample.metrics."`
		Window       settings.Duration `yaml:"window" help:"Window over which gauge mean/max/min are computed."`
		Multiplex    settings.Duration `yaml:"multiplex" help:"Rotate between metric groups that do not fit one pass every this long; 0: drop what does not fit."`
		DutyCycle    float64           `yaml:"duty_cycle" help:"Share of the time the PM session is held, above 0 and at most 1; below 1 it is released for the rest of every pmsample.duty_period (counted as lost, reason duty_cycle). A held session costs a power-capped workload 0.6-0.95 % of its throughput on an H200; released, nothing (docs/performance.md)."`
		DutyPeriod   settings.Duration `yaml:"duty_period" help:"Length of one duty cycle (1s to 1h); each sampled and released phase must last at least 500ms."`
		// Idle release (package idle, docs/pm-sampling.md "Idle release").
		IdleReleaseAfter settings.Duration `yaml:"idle_release_after" help:"Release a GPU's PM session after it has been idle this long (NVML utilisation 0, no kernels, SM active < 0.1 %) and take it back on the first sign of work; 0: never release. Needs NVML (health.library)."`
		IdlePoll         settings.Duration `yaml:"idle_poll" help:"How often a released GPU is polled through NVML for activity (1ms to 1s)."`
		IdleGPM          bool              `yaml:"idle_gpm" help:"While a GPU is released, also read its GPM SM utilisation (Hopper and newer) at every poll: work shows within one poll, where NVML's utilisation and clock-event reasons lag by about 300 ms."`
		IdlePowerRise    float64           `yaml:"idle_power_rise" help:"While a GPU is released, take its session back when its instant power draw rises this many watts above the lowest reading since the release (5 to 500; 0: power not read). The power rises before GPM sees the work."`
		Pipeline         string            `yaml:"pipeline" help:"How each device's decode loop runs: serial (decode, evaluate and reset on one thread) or double (two counter data images; a second thread evaluates and resets one while the other is decoded into). double sustained 10 kHz with the default set on an H200 (docs/performance.md); use it below 200us."`
		Backoff          bool              `yaml:"backoff" help:"When the host cannot decode and evaluate samples as fast as the interval asks (measured in the first second), lengthen the interval to one it sustains instead of losing samples; the effective interval is cupti_pm_sampling_interval_seconds."`
		// Giving the counters to profilers (package profilers, docs/pm-sampling.md "Sharing the counters").
		GiveWay     bool              `yaml:"give_way" help:"Give a GPU's counters to a profiler found among the host's processes (Nsight Compute, Nsight Systems with --gpu-metrics-devices, DCGM's profiling module, pmsample.give_way_to) while it runs, and take them back when it exits (state yielded, cupti_pm_give_ways_total). Needs the host's PID namespace (the chart's hostPID)."`
		GiveWayTo   []string          `yaml:"give_way_to" help:"More process names (comm, comma separated; a trailing * matches a prefix) to give the counters to, counted as tool named."`
		GiveWayPoll settings.Duration `yaml:"give_way_poll" help:"How often the host's processes are looked at for profilers (10ms to 1s); ncu's target asked for the counters more than 0.17 s after a 100ms poll saw its front end on an H100 (docs/pm-sampling.md)."`
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
	c.PMSample.Enabled = true
	c.PMSample.Interval = settings.Duration(pmsample.DefaultInterval)
	c.PMSample.Pipeline = pmsample.PipelineSerial
	c.PMSample.DecodePeriod = settings.Duration(pmsample.DefaultDecodePeriod)
	c.PMSample.Window = settings.Duration(15 * time.Second)
	c.PMSample.DutyCycle = 1
	c.PMSample.DutyPeriod = settings.Duration(10 * time.Second)
	c.PMSample.IdleReleaseAfter = settings.Duration(idle.DefaultAfter)
	c.PMSample.IdlePoll = settings.Duration(idle.DefaultPoll)
	c.PMSample.IdleGPM = true
	c.PMSample.IdlePowerRise = idle.DefaultPowerRise
	c.PMSample.GiveWay = true
	c.PMSample.GiveWayTo = []string{}
	c.PMSample.GiveWayPoll = settings.Duration(profilers.DefaultPoll)
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
	pos := func(name string, d settings.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	between := func(name string, d settings.Duration, lo, hi time.Duration) {
		if time.Duration(d) < lo || time.Duration(d) > hi {
			errs = append(errs, fmt.Errorf("%s must be between %s and %s, got %s", name, lo, hi, d))
		}
	}
	errs = append(errs, pmsample.CheckTiming(time.Duration(c.PMSample.Interval), time.Duration(c.PMSample.DecodePeriod))...)
	pos("pmsample.window", c.PMSample.Window)
	errs = append(errs, c.Health.Validate()...)
	errs = append(errs, c.Activity.Validate()...)
	errs = append(errs, c.OTLP.Validate()...)
	errs = append(errs, c.Attribution.Validate()...)
	if c.Attribution.Watermark == settings.Duration(attribution.DefaultWatermark) && c.Attribution.Watermark <= c.PMSample.DecodePeriod {
		// the default follows a long decode period: samples arrive a decode period late
		c.Attribution.Watermark = 2*c.PMSample.DecodePeriod + settings.Duration(time.Second)
	}
	if c.Attribution.Enabled && c.Attribution.Watermark <= c.PMSample.DecodePeriod {
		errs = append(errs, fmt.Errorf("attribution.watermark (%s) must be longer than pmsample.decode_period (%s): samples arrive a decode period late, and their records later still", c.Attribution.Watermark, c.PMSample.DecodePeriod))
	}
	errs = append(errs, c.validateBudget()...)
	if c.PMSample.MetricSet != "" && len(c.PMSample.Metrics) > 0 {
		errs = append(errs, errors.New("pmsample.metric_set and pmsample.metrics exclude each other: give one"))
	}
	if c.PMSample.IdleReleaseAfter < 0 {
		errs = append(errs, fmt.Errorf("pmsample.idle_release_after must not be negative (0 turns idle release off), got %s", c.PMSample.IdleReleaseAfter))
	}
	between("pmsample.idle_poll", c.PMSample.IdlePoll, idle.MinPoll, idle.MaxPoll)
	between("pmsample.give_way_poll", c.PMSample.GiveWayPoll, profilers.MinPoll, profilers.MaxPoll)
	if w := c.PMSample.IdlePowerRise; w != 0 && !(w >= idle.MinPowerRise && w <= idle.MaxPowerRise) { // !(…) also refuses NaN
		errs = append(errs, fmt.Errorf("pmsample.idle_power_rise must be 0 (off) or between %d and %d watts, got %g", idle.MinPowerRise, idle.MaxPowerRise, w))
	}
	if p := c.PMSample.Pipeline; p != "serial" && p != "double" {
		errs = append(errs, fmt.Errorf("pmsample.pipeline must be serial or double, got %q", p))
	}
	if c.PMSample.Multiplex < 0 {
		errs = append(errs, fmt.Errorf("pmsample.multiplex must not be negative, got %s", c.PMSample.Multiplex))
	}
	switch d := c.PMSample.DutyCycle; {
	case !(d > 0 && d <= 1): // !(…) also refuses NaN
		errs = append(errs, fmt.Errorf("pmsample.duty_cycle must be above 0 and at most 1 (1 samples all the time), got %g", d))
	case c.PMSample.DutyPeriod < settings.Duration(time.Second) || c.PMSample.DutyPeriod > settings.Duration(time.Hour):
		errs = append(errs, fmt.Errorf("pmsample.duty_period must be between 1s and 1h, got %s", c.PMSample.DutyPeriod))
	case d < 1 && len(errs) == 0: // the rest (phase lengths, multiplexing) is the sampler's to judge
		if err := pmsample.CheckOptions(samplerOptions(c)...); err != nil {
			errs = append(errs, fmt.Errorf("pmsample.duty_cycle %g of pmsample.duty_period %s: %w", d, c.PMSample.DutyPeriod, err))
		}
	}
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
