package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
	"github.com/cupti-exporter/cupti-exporter/pipeline"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigPrecedence(t *testing.T) {
	p := writeFile(t, "web:\n  listen_address: 127.0.0.1:1111\npmsample:\n  interval: 100us\n  window: 30s\notlp:\n  header:\n    a: b\n")
	cfg, _, cmd, err := parse([]string{"--config.file", p, "--pmsample.window=5s", "--otlp.header=c=d"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cmd != cmdServe {
		t.Errorf("command %q, want serve", cmd)
	}
	if cfg.Web.ListenAddress != "127.0.0.1:1111" || time.Duration(cfg.PMSample.Interval) != 100*time.Microsecond {
		t.Errorf("YAML values not applied: %+v", cfg)
	}
	if time.Duration(cfg.PMSample.Window) != 5*time.Second {
		t.Errorf("flag did not override YAML: window %s", cfg.PMSample.Window)
	}
	if cfg.OTLP.Header["a"] != "b" || cfg.OTLP.Header["c"] != "d" {
		t.Errorf("headers %v", cfg.OTLP.Header)
	}
	if cfg.Activity.Socket != "/run/cupti-exporter/activity.sock" || !cfg.Activity.Enabled {
		t.Errorf("defaults lost: %+v", cfg.Activity)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		args       []string
		want       []string
	}{
		{"unknown key", "web:\n  listen_address: :1\n  listen_adress: :2\n", nil, []string{"line 3: web.listen_adress: unknown key; did you mean web.listen_address?"}},
		{"unknown section", "pmsampling:\n  interval: 1ms\n", nil, []string{"line 1: pmsampling: unknown key; did you mean pmsample?"}},
		{"unknown key, none near", "pmsample:\n  speed: 2\n", nil, []string{"line 2: pmsample.speed: unknown key; pmsample has enabled, interval, decode_period,"}},
		{"section given a number", "pmsample: 5\n", nil, []string{`line 1: pmsample: want a mapping of keys (enabled, interval, decode_period, metrics,`, `got "5"`}},
		{"bool", "pmsample:\n  idle_gpm: sometimes\n", nil, []string{`line 2: pmsample.idle_gpm: want true or false, got "sometimes"`}},
		{"whole number", "web:\n  max_requests: 2.5\n", nil, []string{`line 2: web.max_requests: want a whole number, got "2.5"`}},
		{"list", "pmsample:\n  metrics: a,b\n", nil, []string{`line 2: pmsample.metrics: want a list of strings`}},
		{"header", "otlp:\n  header:\n    x-tenant: [a]\n", nil, []string{`line 3: otlp.header.x-tenant: want a string, got a list`}},
		{"twice", "pmsample:\n  interval: 1ms\n  interval: 2ms\n", nil, []string{`line 3: pmsample.interval: given twice (first on line 2)`}},
		{"bad duration", "pmsample:\n  interval: 10x\n", nil, []string{`line 2: pmsample.interval: invalid duration "10x"`}},
		{"duration list", "pmsample:\n  window: [1s]\n", nil, []string{`line 2: pmsample.window: want a duration such as 250ms, got a list`}},
		{"invalid yaml", "web: [\n", nil, []string{"config file", "line"}},
		{"negative", "pmsample:\n  window: -1s\n", nil, []string{"pmsample.window must be positive"}},
		{"protocol", "otlp:\n  protocol: udp\n", nil, []string{"otlp.protocol must be grpc or http"}},
		{"idle release negative", "pmsample:\n  idle_release_after: -1s\n", nil, []string{"pmsample.idle_release_after must not be negative"}},
		{"idle poll", "", []string{"--pmsample.idle-poll=2s"}, []string{"pmsample.idle_poll must be between 1ms and 1s"}},
		{"gpm mode", "", []string{"--gpm.mode=always"}, []string{`gpm.mode must be fill, only or off, got "always"`}},
		{"gpm interval below GPM's refresh", "gpm:\n  interval: 50ms\n", nil, []string{"gpm.interval must be between 100ms and 10s, got 50ms"}},
		{"gpm family GPM does not serve", "gpm:\n  families: [cupti_sm_active_ratio, cupti_sm_occupancy_ratio]\n", nil, []string{`gpm.families: "cupti_sm_occupancy_ratio" is not a family GPM serves`}},
		{"idle power rise", "pmsample:\n  idle_power_rise: 2\n", nil, []string{"pmsample.idle_power_rise must be 0 (off) or between 5 and 500 watts, got 2"}},
		{"idle power rise NaN", "", []string{"--pmsample.idle-power-rise=NaN"}, []string{"pmsample.idle_power_rise must be 0 (off) or between 5 and 500 watts, got NaN"}},
		{"idle power rise text", "", []string{"--pmsample.idle-power-rise=lots"}, []string{"lots"}},
		{"duty cycle zero", "", []string{"--pmsample.duty-cycle=0"}, []string{"pmsample.duty_cycle must be above 0 and at most 1"}},
		{"duty period", "", []string{"--pmsample.duty-cycle=0.5", "--pmsample.duty-period=500ms"}, []string{"pmsample.duty_period must be between 1s and 1h, got 500ms"}},
		{"duty phase", "", []string{"--pmsample.duty-cycle=0.96"}, []string{"pmsample.duty_cycle 0.96 of pmsample.duty_period 10s", "9.6s sampled and 400ms released"}},
		{"duty with multiplexing", "", []string{"--pmsample.duty-cycle=0.5", "--pmsample.multiplex=2s"}, []string{"pmsample.duty_cycle 0.5", "cannot be combined"}},
		{"flag duration", "", []string{"--pmsample.interval=fast"}, []string{`invalid duration "fast"`}},
		{"unknown flag", "", []string{"--web.listen"}, []string{"unknown long flag '--web.listen'"}},
		{"estimator", "attribution:\n  estimator: nnls\n", nil, []string{`unknown attribution estimator "nnls"`, "rate"}},
		{"watermark under the decode period", "", []string{"--attribution.watermark=50ms"}, []string{"attribution.watermark (50ms) must be longer than pmsample.decode_period (250ms)"}},
		{"pending records", "", []string{"--attribution.max-pending-records=0"}, []string{"attribution.max_pending_records must be positive"}},
		{"series group", "series:\n  extra: [window_min, min]\n", nil, []string{`series.extra: unknown group "min"`, "window_min, zero_reasons, sampler_timing, nvml_detail or all"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--config.file", writeFile(t, c.yaml)}, c.args...)
			_, _, _, err := parse(args, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error spans several lines: %q", err)
			}
			// No Go internals (yaml.v3 alone printed a 2,992-byte struct for "pmsample: 5").
			if strings.Contains(err.Error(), "struct {") || strings.Contains(err.Error(), "yaml:\"") || len(err.Error()) > 500 {
				t.Errorf("error shows Go internals or runs long (%d bytes): %q", len(err.Error()), err)
			}
		})
	}
}

func TestConfigFileMissing(t *testing.T) {
	_, _, _, err := parse([]string{"--config.file", "/nonexistent/c.yaml"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "reading config file") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("err %v", err)
	}
}

// A config file over 1 MiB is refused before it is parsed (a 200 MB file took 1.43 GB), with
// an error naming the file, its size and the limit; one of exactly 1 MiB is read.
func TestConfigFileTooLarge(t *testing.T) {
	big := "# " + strings.Repeat("x", pipeline.MaxConfigBytes) + "\n"
	path := writeFile(t, big)
	_, _, _, err := parse([]string{"--config.file", path}, io.Discard, io.Discard)
	want := fmt.Sprintf("%s: %d bytes, more than the 1048576 a configuration file may have", path, len(big))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want it to say %q", err, want)
	}
	fits := "# " + strings.Repeat("x", pipeline.MaxConfigBytes-3) + "\n"
	if _, _, _, err := parse([]string{"--config.file", writeFile(t, fits)}, io.Discard, io.Discard); err != nil {
		t.Fatalf("a file of exactly %d bytes: %v", len(fits), err)
	}
}

func TestEmptyConfigFileKeepsDefaults(t *testing.T) {
	cfg, _, _, err := parse([]string{"--config.file", writeFile(t, "")}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Web.ListenAddress != ":9477" {
		t.Fatalf("listen address %q", cfg.Web.ListenAddress)
	}
}

// Hostile config files give a configuration or one line of error naming the file, never a
// panic. The parser itself (internal/strictyaml) is fuzzed there: a fuzz target here would
// rebuild the roughly 1,000 packages this command imports with fuzz instrumentation, which
// took 229 s of the CI's fuzz smoke on 2 cores.
func TestParseConfigHostile(t *testing.T) {
	for _, doc := range []string{
		"", "pmsample:\n  interval: 1ms\n  metrics: [a, b]\n", "web: {listen_address: ':9477'}\n",
		"pmsample:\n  intervall: 1ms\n", "pmsample:\n  interval: 1 ms\n", "otlp:\n  header: {a: b}\n",
		"activity: {socket_mode: '0999'}\n", "[1, 2]\n", "pmsample: [\n", "a: &x [*x]\n", "pmsample: 5\n",
		"pmsample: &p {interval: 1ms}\nattribution:\n  <<: *p\n", "web:\n  max_requests: 1e30\n",
		"pmsample:\n  duty_cycle: .nan\n", "pmsample:\n  metrics: [[a]]\n", "otlp:\n  header:\n    ? [a]\n    : b\n",
		"\xff\xfe", "web: !!binary aGVsbG8=\n", "--- \n...\n", "pmsample: *nowhere\n",
	} {
		c := pipeline.DefaultConfig()
		if err := pipeline.ParseConfig([]byte(doc), "hostile.yml", &c); err != nil {
			if !strings.HasPrefix(err.Error(), "config file hostile.yml: ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: error %q is not one line naming the file", doc, err)
			}
			continue
		}
		_ = c.Validate()
	}
}

// TestAttributionConfig checks the attribution keys from YAML and flags.
func TestAttributionConfig(t *testing.T) {
	cfg, _, _, err := parse([]string{"--config.file", writeFile(t, "attribution:\n  estimator: overlap\n  max_pending_records: 1000\n"),
		"--attribution.watermark=5s", "--no-attribution.enabled"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Attribution
	if a.Enabled || a.Estimator != "overlap" || a.MaxPendingRecords != 1000 || a.Watermark != settings.Duration(5*time.Second) {
		t.Errorf("attribution config %+v", a)
	}
}
