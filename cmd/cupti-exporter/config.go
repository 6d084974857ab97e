package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is everything `serve` (and `replay`, `record`) can be told, from the YAML file
// given with --config.file and from flags. Each leaf has a flag of the same dotted name,
// with '_' written '-' (pmsample.decode_period is --pmsample.decode-period) unless a flag
// tag names it (web.config_file is --web.config.file, as in other exporters). Precedence:
// built-in default, then the YAML file, then flags given on the command line.
type Config struct {
	Web struct {
		ListenAddress       string `yaml:"listen_address" help:"Address to serve /metrics, /healthz, /readyz and the pause/resume API on."`
		ConfigFile          string `yaml:"config_file" flag:"web.config.file" help:"exporter-toolkit web configuration file (TLS, basic auth)."`
		TelemetryPath       string `yaml:"telemetry_path" help:"Path under which to expose metrics."`
		HealthListenAddress string `yaml:"health_listen_address" help:"Address to serve only /healthz and /readyz on, in plain HTTP without the web config (for kubelet probes when TLS or auth is on); empty: off."`
		EnablePMSamplingAPI bool   `yaml:"enable_pm_sampling_api" flag:"web.enable-pm-sampling-api" help:"Serve POST /api/v1/pm-sampling/pause and /resume on the listen address (under the web config); off: they answer 404."`
	} `yaml:"web"`
	PMSample struct {
		Enabled      bool     `yaml:"enabled" help:"Sample device counters with CUPTI PM Sampling."`
		Interval     Duration `yaml:"interval" help:"Hardware sampling interval (GPU time)."`
		DecodePeriod Duration `yaml:"decode_period" help:"How often the hardware buffer is decoded."`
		Metrics      []string `yaml:"metrics" help:"Perfworks metrics to sample (comma separated); empty: the curated set."`
		MetricSet    string   `yaml:"metric_set" help:"Named single-pass metric set of CUPTI 13.2+ (listed by metrics plan) instead of pmsample.metrics."`
		Window       Duration `yaml:"window" help:"Window over which gauge mean/max/min are computed."`
		Multiplex    Duration `yaml:"multiplex" help:"Rotate between metric groups that do not fit one pass every this long; 0: drop what does not fit."`
		// Idle release (package idle, docs/pm-sampling.md "Idle release").
		IdleReleaseAfter Duration `yaml:"idle_release_after" help:"Release a GPU's PM session after it has been idle this long (NVML utilisation 0, no kernels, SM active < 0.1 %) and take it back on the first sign of work; 0: never release. Needs NVML (health.library)."`
		IdlePoll         Duration `yaml:"idle_poll" help:"How often a released GPU is polled through NVML for activity (1ms to 1s)."`
	} `yaml:"pmsample"`
	CUPTI struct {
		Library string `yaml:"library" help:"Path to libcupti.so (or its folder); empty: search the usual places."`
	} `yaml:"cupti"`
	Activity struct {
		Enabled bool   `yaml:"enabled" help:"Receive kernel and memcpy records from injected processes."`
		Socket  string `yaml:"socket" help:"Unix socket the injection library connects to."`
		// SocketMode is octal text so that YAML and flags read it the same way.
		SocketMode string `yaml:"socket_mode" help:"Permissions of the activity socket, octal (0666 lets workloads of any user connect)."`
	} `yaml:"activity"`
	OTLP struct {
		Endpoint string            `yaml:"endpoint" help:"OTLP endpoint (host:port for grpc, URL for http); empty: no OTLP push."`
		Protocol string            `yaml:"protocol" help:"OTLP protocol: grpc or http."`
		Interval Duration          `yaml:"interval" help:"OTLP push interval."`
		Insecure bool              `yaml:"insecure" help:"Push OTLP without TLS."`
		Header   map[string]string `yaml:"header" help:"OTLP request header NAME=VALUE (repeatable)."`
	} `yaml:"otlp"`
	Kubelet struct {
		PodResourcesSocket string `yaml:"pod_resources_socket" help:"Kubelet pod-resources socket for pod attribution of GPUs; empty: off."`
	} `yaml:"kubelet"`
	Mapping struct {
		RulesFile string `yaml:"rules_file" help:"YAML file of extra metric mapping rules."`
	} `yaml:"mapping"`
	Health struct {
		Enabled  bool     `yaml:"enabled" help:"Read GPU health from NVML: memory, utilisation, power, energy, temperatures, clocks, throttling, XID errors, ECC, row remapping, PCIe replays, NVLink state, per-process memory, MIG."`
		Interval Duration `yaml:"interval" help:"How often NVML is read (100ms to 1h)."`
		Library  string   `yaml:"library" help:"Path to libnvidia-ml.so.1; empty: the dynamic loader's search path."`
	} `yaml:"health"`
}

// defaultConfig is the built-in configuration.
func defaultConfig() Config {
	var c Config
	c.Web.ListenAddress = ":9477"
	c.Web.TelemetryPath = "/metrics"
	c.Web.HealthListenAddress = ":9478"
	c.PMSample.Enabled = true
	c.PMSample.Interval = Duration(time.Millisecond)
	c.PMSample.DecodePeriod = Duration(100 * time.Millisecond)
	c.PMSample.Window = Duration(15 * time.Second)
	c.PMSample.IdleReleaseAfter = Duration(time.Minute)
	c.PMSample.IdlePoll = Duration(20 * time.Millisecond)
	c.Activity.Enabled = true
	c.Activity.Socket = "/run/cupti-exporter/activity.sock"
	c.Activity.SocketMode = "0660"
	c.OTLP.Protocol = "grpc"
	c.OTLP.Interval = Duration(15 * time.Second)
	c.Health.Enabled = true
	c.Health.Interval = Duration(time.Second)
	return c
}

// validate checks values that flags and YAML both accept but the exporter cannot use.
func (c *Config) validate() error {
	var errs []error
	pos := func(name string, d Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	pos("pmsample.interval", c.PMSample.Interval)
	pos("pmsample.decode_period", c.PMSample.DecodePeriod)
	pos("pmsample.window", c.PMSample.Window)
	pos("otlp.interval", c.OTLP.Interval)
	if c.Health.Interval < Duration(100*time.Millisecond) || c.Health.Interval > Duration(time.Hour) {
		errs = append(errs, fmt.Errorf("health.interval must be between 100ms and 1h, got %s", c.Health.Interval))
	}
	if c.PMSample.MetricSet != "" && len(c.PMSample.Metrics) > 0 {
		errs = append(errs, errors.New("pmsample.metric_set and pmsample.metrics exclude each other: give one"))
	}
	if c.PMSample.IdleReleaseAfter < 0 {
		errs = append(errs, fmt.Errorf("pmsample.idle_release_after must not be negative (0 turns idle release off), got %s", c.PMSample.IdleReleaseAfter))
	}
	if c.PMSample.IdlePoll < Duration(time.Millisecond) || c.PMSample.IdlePoll > Duration(time.Second) {
		errs = append(errs, fmt.Errorf("pmsample.idle_poll must be between 1ms and 1s, got %s", c.PMSample.IdlePoll))
	}
	if c.PMSample.Multiplex < 0 {
		errs = append(errs, fmt.Errorf("pmsample.multiplex must not be negative, got %s", c.PMSample.Multiplex))
	}
	if c.OTLP.Protocol != "grpc" && c.OTLP.Protocol != "http" {
		errs = append(errs, fmt.Errorf("otlp.protocol must be grpc or http, got %q", c.OTLP.Protocol))
	}
	if _, err := c.socketMode(); err != nil {
		errs = append(errs, err)
	}
	if !strings.HasPrefix(c.Web.TelemetryPath, "/") {
		errs = append(errs, fmt.Errorf("web.telemetry_path must start with /, got %q", c.Web.TelemetryPath))
	}
	return errors.Join(errs...)
}

// socketMode parses activity.socket_mode.
func (c *Config) socketMode() (fs.FileMode, error) {
	m, err := strconv.ParseUint(c.Activity.SocketMode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("activity.socket_mode must be octal permissions such as 0660, got %q", c.Activity.SocketMode)
	}
	return fs.FileMode(m), nil
}

// activitySocketMode is activity.socket_mode once validate has accepted it.
func (c *Config) activitySocketMode() fs.FileMode {
	m, _ := c.socketMode()
	return m
}

// Duration is a time.Duration written as "250ms", "1us", "15s" in YAML.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a duration and names the line of a bad one.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 250ms, got a %s", n.Line, kindName(n.Kind))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q: want a number with a unit (us, ms, s, m, h), e.g. 250ms", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

var notFoundRE = regexp.MustCompile(`field (\S+) not found in type [^\n]*`)

// loadConfigFile reads a YAML configuration over c. Unknown keys are errors.
func loadConfigFile(path string, c *Config) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading config file: %w", err)
	}
	return parseConfig(data, path, c)
}

// parseConfig decodes YAML over c; errors name the file and the line.
func parseConfig(data []byte, path string, c *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil {
		if errors.Is(err, io.EOF) { // an empty file keeps the defaults
			return nil
		}
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
		msg = notFoundRE.ReplaceAllString(msg, "unknown key $1")
		msg = strings.ReplaceAll(msg, "\n  ", "; ")
		return fmt.Errorf("config file %s: %s", path, msg)
	}
	return nil
}
