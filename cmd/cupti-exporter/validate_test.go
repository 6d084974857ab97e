package main

import (
	"io"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
	"github.com/cupti-exporter/cupti-exporter/pipeline"
)

// Configurations that cannot work are refused at start, each with one line naming the key
// and what it may be (before, some made the server panic at start or sample nothing).
func TestConfigRefusesWhatCannotWork(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--web.telemetry-path=/healthz"}, `web.telemetry_path "/healthz" is taken by the exporter's own /healthz endpoint`},
		{[]string{"--web.telemetry-path=/readyz"}, `taken by the exporter's own /readyz endpoint`},
		{[]string{"--web.telemetry-path=/{$}"}, `web.telemetry_path must be a path of letters, digits and ._~-/ starting with /, got "/{$}"`},
		{[]string{"--web.telemetry-path=/metrics/{x"}, `must be a path of letters, digits`},
		{[]string{"--web.telemetry-path=/a b"}, `must be a path of letters, digits`},
		{[]string{"--web.telemetry-path=/api/v1/pm-sampling/"}, `inside the PM sampling pause API (/api/v1/pm-sampling/)`},
		{[]string{"--web.telemetry-path=/api/v1/pm-sampling/pause"}, `inside the PM sampling pause API`},
		{[]string{"--web.telemetry-path=/api/v1/pm-sampling"}, `inside the PM sampling pause API`},
		{[]string{"--web.telemetry-path=metrics"}, `starting with /`},
		{[]string{"--web.telemetry-path=/a/../metrics"}, `clean path`},
		{[]string{"--pmsample.interval=1ns"}, "pmsample.interval must be between 100µs and 1s, got 1ns"},
		{[]string{"--pmsample.interval=2s"}, "pmsample.interval must be between 100µs and 1s, got 2s"},
		{[]string{"--pmsample.decode-period=1000h"}, "pmsample.decode_period must be between 10ms and 10s, got 1000h0m0s"},
		{[]string{"--pmsample.decode-period=1ms"}, "pmsample.decode_period must be between 10ms and 10s"},
		{[]string{"--pmsample.interval=100us", "--pmsample.decode-period=5s"}, "holds 50000 samples of pmsample.interval 100µs; at most 20000 fit the hardware buffer: shorten the decode period to 2s or less"},
		{[]string{"--web.listen-address="}, "web.listen_address is empty: give host:port"},
		{[]string{"--web.listen-address=9477"}, `web.listen_address "9477": want host:port`},
		{[]string{"--web.listen-address=:http"}, "port must be a number from 0 to 65535"},
		{[]string{"--web.listen-address=:70000"}, "port must be a number from 0 to 65535"},
		{[]string{"--web.health-listen-address=:99999"}, `web.health_listen_address ":99999": port must be a number from 0 to 65535, or empty to turn the health listener off`},
		{[]string{"--web.health-listen-address=9478"}, `web.health_listen_address "9478": want host:port, e.g. :9478 or 127.0.0.1:9478`},
		{[]string{"--web.listen-address=:9478"}, `web.listen_address ":9478" and web.health_listen_address ":9478" (the plain /healthz and /readyz listener, default :9478) both take port 9478: give --web.health-listen-address another port, or empty to turn it off`},
		{[]string{"--web.listen-address=127.0.0.1:9000", "--web.health-listen-address=0.0.0.0:9000"}, "both take port 9000"},
		{[]string{"--web.listen-address=[::1]:9000", "--web.health-listen-address=:9000"}, "both take port 9000"},
		{[]string{"--web.max-requests=-1"}, "web.max_requests must not be negative"},
		{[]string{"--activity.max-connections=0"}, "activity.max_connections must be at least 1"},
		{[]string{"--activity.memory-budget=1MiB"}, "activity.memory_budget must be at least 16MiB, got 1MiB"},
		{[]string{"--activity.memory-budget=lots"}, `invalid size "lots"`},
		{[]string{"--activity.hello-timeout=0s"}, "activity.hello_timeout must be positive"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, _, _, err := parse(c.args, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

// The edges of the allowed ranges, and the usual values, are accepted.
func TestConfigAcceptsBounds(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"--web.telemetry-path=/"},
		{"--web.telemetry-path=/custom/metrics_v2.txt"},
		{"--web.telemetry-path=/api/v1/metrics"},
		{"--web.listen-address=127.0.0.1:0", "--web.max-requests=0"},
		{"--web.listen-address=[::1]:9477"},
		{"--web.listen-address=127.0.0.1:0", "--web.health-listen-address=127.0.0.1:0"},
		{"--web.listen-address=127.0.0.1:9000", "--web.health-listen-address=127.0.0.2:9000"},
		{"--web.listen-address=:9000", "--web.health-listen-address="},
		{"--pmsample.interval=100us", "--pmsample.decode-period=2s"},
		{"--pmsample.interval=1s", "--pmsample.decode-period=10s"},
		{"--pmsample.interval=1ms", "--pmsample.decode-period=10ms"},
		{"--activity.memory-budget=16MiB"},
		{"--activity.memory-budget=1GiB", "--activity.max-connections=1024"},
	} {
		if _, _, _, err := parse(args, io.Discard, io.Discard); err != nil {
			t.Errorf("%q refused: %v", args, err)
		}
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]settings.ByteSize{"256MiB": 256 << 20, "1GiB": 1 << 30, "65536": 65536, "4 KiB": 4096, "1MB": 1e6, "0": 0} {
		if got, err := settings.ParseByteSize(in); err != nil || got != want {
			t.Errorf("settings.ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "1.5GiB", "1TiB", "99999999999GiB"} {
		if _, err := settings.ParseByteSize(in); err == nil {
			t.Errorf("settings.ParseByteSize(%q) accepted", in)
		}
	}
	if s := settings.ByteSize(256 << 20).String(); s != "256MiB" {
		t.Errorf("String = %q", s)
	}
	cfg := pipeline.DefaultConfig()
	if err := pipeline.ParseConfig([]byte("activity:\n  memory_budget: 512MiB\n"), "c.yaml", &cfg); err != nil || cfg.Activity.MemoryBudget != 512<<20 {
		t.Errorf("YAML memory_budget: %v, %d", err, cfg.Activity.MemoryBudget)
	}
	if err := pipeline.ParseConfig([]byte("activity:\n  memory_budget: [1]\n"), "c.yaml", &cfg); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("YAML list as size: %v", err)
	}
}
