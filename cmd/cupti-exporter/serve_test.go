package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPMSamplingAPIOptIn checks that the pause/resume API is served only with
// --web.enable-pm-sampling-api, and that every 404 says why.
func TestPMSamplingAPIOptIn(t *testing.T) {
	sampler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "sampler\n") })
	for _, tc := range []struct {
		name     string
		args     []string
		pm       pmSetup
		wantCode int
		want     string
	}{
		{"off by default", nil, pmSetup{pause: sampler}, 404, "start the exporter with --web.enable-pm-sampling-api"},
		{"enabled", []string{"--web.enable-pm-sampling-api"}, pmSetup{pause: sampler}, 200, "sampler\n"},
		{"enabled, PM sampling off", []string{"--web.enable-pm-sampling-api"}, pmSetup{off: "PM sampling is off: libcupti.so not found"}, 404,
			"no PM sampling session to pause: PM sampling is off: libcupti.so not found"},
		{"enabled, recording", []string{"--web.enable-pm-sampling-api"}, pmSetup{}, 404, "serves a recording (replay or --demo)"},
		{"demo without the flag", []string{"--demo"}, pmSetup{}, 404, "--web.enable-pm-sampling-api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _, _, err := parse(tc.args, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			pmSamplingAPI(cfg, tc.pm).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/pm-sampling/pause", nil))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("POST pause = %d %q, want %d with %q", rec.Code, rec.Body.String(), tc.wantCode, tc.want)
			}
		})
	}
}

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
