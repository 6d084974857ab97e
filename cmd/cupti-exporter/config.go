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
		ListenAddress string `yaml:"listen_address" help:"Address to serve /metrics, /healthz, /readyz and the pause/resume API on."`
		ConfigFile    string `yaml:"config_file" flag:"web.config.file" help:"exporter-toolkit web configuration file (TLS, basic auth)."`
		TelemetryPath string `yaml:"telemetry_path" help:"Path under which to expose metrics."`
	} `yaml:"web"`
	PMSample struct {
		Enabled      bool     `yaml:"enabled" help:"Sample device counters with CUPTI PM Sampling."`
		Interval     Duration `yaml:"interval" help:"Hardware sampling interval (GPU time)."`
		DecodePeriod Duration `yaml:"decode_period" help:"How often the hardware buffer is decoded."`
		Metrics      []string `yaml:"metrics" help:"Perfworks metrics to sample (comma separated); empty: the curated set."`
		MetricSet    string   `yaml:"metric_set" help:"Named single-pass metric set of CUPTI 13.2+ (listed by metrics plan) instead of pmsample.metrics."`
		Window       Duration `yaml:"window" help:"Window over which gauge mean/max/min are computed."`
		Multiplex    Duration `yaml:"multiplex" help:"Rotate between metric groups that do not fit one pass every this long; 0: drop what does not fit."`
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
	Kubernetes struct {
		PodInformer string `yaml:"pod_informer" help:"Attribute traced processes to pods from their cgroup through an informer of this node's pods: auto (on when KUBERNETES_SERVICE_HOST is set and the node name is known), on or off."`
		NodeName    string `yaml:"node_name" help:"This node's name, for the pod informer; empty: $NODE_NAME."`
		Kubeconfig  string `yaml:"kubeconfig" help:"Kubeconfig file for the pod informer (out of cluster); empty: the pod's service account."`
	} `yaml:"kubernetes"`
	Mapping struct {
		RulesFile string `yaml:"rules_file" help:"YAML file of extra metric mapping rules."`
	} `yaml:"mapping"`
}

// defaultConfig is the built-in configuration.
func defaultConfig() Config {
	var c Config
	c.Web.ListenAddress = ":9477"
	c.Web.TelemetryPath = "/metrics"
	c.PMSample.Enabled = true
	c.PMSample.Interval = Duration(time.Millisecond)
	c.PMSample.DecodePeriod = Duration(100 * time.Millisecond)
	c.PMSample.Window = Duration(15 * time.Second)
	c.Activity.Enabled = true
	c.Activity.Socket = "/run/cupti-exporter/activity.sock"
	c.Activity.SocketMode = "0660"
	c.OTLP.Protocol = "grpc"
	c.OTLP.Interval = Duration(15 * time.Second)
	c.Kubernetes.PodInformer = "auto"
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
	if c.PMSample.MetricSet != "" && len(c.PMSample.Metrics) > 0 {
		errs = append(errs, errors.New("pmsample.metric_set and pmsample.metrics exclude each other: give one"))
	}
	if c.PMSample.Multiplex < 0 {
		errs = append(errs, fmt.Errorf("pmsample.multiplex must not be negative, got %s", c.PMSample.Multiplex))
	}
	if c.OTLP.Protocol != "grpc" && c.OTLP.Protocol != "http" {
		errs = append(errs, fmt.Errorf("otlp.protocol must be grpc or http, got %q", c.OTLP.Protocol))
	}
	switch c.Kubernetes.PodInformer {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("kubernetes.pod_informer must be auto, on or off, got %q", c.Kubernetes.PodInformer))
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
