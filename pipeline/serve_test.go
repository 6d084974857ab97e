package pipeline

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
		enable   bool // --web.enable-pm-sampling-api
		pm       pmSetup
		wantCode int
		want     string
	}{
		{"off by default", false, pmSetup{pause: sampler, live: true}, 404, "start the exporter with --web.enable-pm-sampling-api"},
		{"enabled", true, pmSetup{pause: sampler, live: true}, 200, "sampler\n"},
		{"enabled, PM sampling off", true, pmSetup{off: "PM sampling is off: libcupti.so not found", live: true}, 404,
			"no PM sampling session to pause: PM sampling is off: libcupti.so not found"},
		// A recording says it has nothing to pause, flag or not: never "add the flag" first.
		{"enabled, recording", true, pmSetup{}, 404, noSessionInRecording},
		{"demo without the flag", false, pmSetup{}, 404, noSessionInRecording},
		{"demo with the flag", true, pmSetup{}, 404, noSessionInRecording},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Web.EnablePMSamplingAPI = tc.enable
			rec := httptest.NewRecorder()
			pmSamplingAPI(&cfg, tc.pm).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/pm-sampling/pause", nil))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("POST pause = %d %q, want %d with %q", rec.Code, rec.Body.String(), tc.wantCode, tc.want)
			}
		})
	}
}
