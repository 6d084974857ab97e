package main

import (
	"io"
	"strings"
	"testing"
)

func TestHealthListenAddressDefault(t *testing.T) {
	cfg, _, _, err := parse(nil, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Web.HealthListenAddress != ":9478" {
		t.Errorf("web.health_listen_address = %q, want :9478", cfg.Web.HealthListenAddress)
	}
	cfg, _, _, err = parse([]string{"--web.health-listen-address="}, io.Discard, io.Discard)
	if err != nil || cfg.Web.HealthListenAddress != "" {
		t.Errorf("--web.health-listen-address= gives %q (%v), want empty (off)", cfg.Web.HealthListenAddress, err)
	}
}

// The health listener follows the main listener's host unless its address names one:
// a loopback exporter opens nothing on other interfaces.
func TestHealthListenAddressFollowsMainHost(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ":9478"},
		{[]string{"--web.listen-address=127.0.0.1:9477"}, "127.0.0.1:9478"},
		{[]string{"--web.listen-address=[::1]:9477"}, "[::1]:9478"},
		{[]string{"--web.listen-address=localhost:9100", "--web.health-listen-address=:9101"}, "localhost:9101"},
		{[]string{"--web.listen-address=127.0.0.1:9477", "--web.health-listen-address=0.0.0.0:9478"}, "0.0.0.0:9478"},
		{[]string{"--web.listen-address=127.0.0.1:9477", "--web.health-listen-address=[::]:9478"}, "[::]:9478"},
		{[]string{"--web.listen-address=127.0.0.1:9477", "--web.health-listen-address="}, ""},
	} {
		cfg, _, _, err := parse(tc.args, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if got := cfg.Web.HealthAddress(); got != tc.want {
			t.Errorf("%q: health listener on %q, want %q", tc.args, got, tc.want)
		}
	}
}

// A bad health address is refused at start, before a recording is read or a port bound.
func TestBadHealthAddressRefusedBeforeDemo(t *testing.T) {
	var stdout, stderr strings.Builder
	code := run(t.Context(), []string{"--demo", "--web.health-listen-address=:99999"}, &stdout, &stderr)
	want := `cupti-exporter: error: invalid configuration: web.health_listen_address ":99999": port must be a number from 0 to 65535, or empty to turn the health listener off` + "\n"
	if code != 1 || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), want)
	}
}
