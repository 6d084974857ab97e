package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// Bad input ends the binary with a non-zero code and one clear line naming the cause.
func TestBadInputFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A recording cut inside a frame replays its whole frames (recording-format.md); one cut
	// inside its header, or with a damaged frame, is refused with the byte offset.
	truncated := write("cut.cuptirec", string(demo.Recording()[:20]))
	flipped := []byte(string(demo.Recording()))
	flipped[200000] ^= 0xff
	corrupt := write("corrupt.cuptirec", string(flipped))
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown key", []string{"--demo", "--config.file", write("a.yaml", "web:\n  listen_adress: :1\n")}, []string{"line 2", "web.listen_adress: unknown key; did you mean web.listen_address?"}},
		{"section given a value", []string{"--demo", "--config.file", write("s.yaml", "pmsample: 5\n")}, []string{"line 1", "pmsample: want a mapping of keys (enabled, interval,"}},
		{"bad duration", []string{"--demo", "--config.file", write("b.yaml", "pmsample:\n  window: 5 seconds\n")}, []string{"line 2", "pmsample.window", "invalid duration"}},
		{"invalid yaml", []string{"--demo", "--config.file", write("c.yaml", "web: [\n")}, []string{"config file"}},
		{"missing config", []string{"--demo", "--config.file", filepath.Join(dir, "none.yaml")}, []string{"reading config file", "no such file"}},
		{"bad flag duration", []string{"--demo", "--pmsample.window=soon"}, []string{`invalid duration "soon"`}},
		{"truncated recording", []string{"replay", truncated, "--web.listen-address=127.0.0.1:0"}, []string{"truncated at byte"}},
		{"corrupt recording", []string{"replay", corrupt, "--web.listen-address=127.0.0.1:0"}, []string{"corrupt at byte", "checksum"}},
		{"telemetry path /healthz", []string{"--demo", "--web.telemetry-path=/healthz"}, []string{"web.telemetry_path", "/healthz endpoint"}},
		{"telemetry path /readyz", []string{"--demo", "--web.telemetry-path=/readyz"}, []string{"/readyz endpoint"}},
		{"telemetry path /{$}", []string{"--demo", "--web.telemetry-path=/{$}"}, []string{"letters, digits and ._~-/"}},
		{"telemetry path pattern", []string{"--demo", "--web.telemetry-path=/metrics/{x"}, []string{"letters, digits and ._~-/"}},
		{"telemetry path space", []string{"--demo", "--web.telemetry-path=/a b"}, []string{"letters, digits and ._~-/"}},
		{"telemetry path pause API", []string{"--demo", "--web.telemetry-path=/api/v1/pm-sampling/"}, []string{"inside the PM sampling pause API"}},
		{"telemetry path pause", []string{"--demo", "--web.telemetry-path=/api/v1/pm-sampling/pause"}, []string{"inside the PM sampling pause API"}},
		{"interval 1ns", []string{"--demo", "--pmsample.interval=1ns"}, []string{"pmsample.interval must be between 100µs and 1s, got 1ns"}},
		{"decode period 1000h", []string{"--demo", "--pmsample.decode-period=1000h"}, []string{"pmsample.decode_period must be between 10ms and 10s"}},
		{"empty listen address", []string{"--demo", "--web.listen-address="}, []string{"web.listen_address is empty"}},
		{"health port", []string{"--demo", "--web.health-listen-address=:99999"}, []string{`web.health_listen_address ":99999": port must be a number from 0 to 65535`}},
		{"listeners on one port", []string{"--demo", "--web.listen-address=127.0.0.1:9478"}, []string{"both take port 9478", "--web.health-listen-address"}},
		{"memory budget", []string{"--demo", "--activity.memory-budget=1KiB"}, []string{"activity.memory_budget must be at least 16MiB"}},
		{"not a recording", []string{"replay", write("x.txt", "hello"), "--web.listen-address=127.0.0.1:0"}, []string{"not a cupti-exporter recording"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out := runExit(t, 30*time.Second, c.args...)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; output:\n%s", out)
			}
			if !contains(out, c.want...) {
				t.Errorf("output lacks %q:\n%s", c.want, out)
			}
			if strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
				t.Errorf("output shows a panic:\n%s", out)
			}
		})
	}
}

func TestAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, out := runExit(t, 30*time.Second, "--demo", "--web.listen-address="+l.Addr().String(), "--web.health-listen-address=")
	if code == 0 || !contains(out, l.Addr().String()) || !strings.Contains(strings.ToLower(out), "in use") {
		t.Fatalf("exit %d, want non-zero naming the address in use:\n%s", code, out)
	}
}
