package strictyaml

import (
	"errors"
	"strings"
	"testing"
)

// Any bytes give a value or one line of error, never a panic; an *Error names a
// line, never "yaml:" nor a Go type.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		"", "pmsample:\n  interval: 1ms\n  metrics: [a, b]\n", "web: {listen_address: ':9477'}\n",
		"pmsample:\n  intervall: 1ms\n", "pmsample:\n  interval: 1 ms\n", "otlp:\n  header: {a: b}\n",
		"pmsample: 5\n", "[1, 2]\n", "pmsample: [\n", "a: &x [*x]\n", "x: &x {a: 1}\ny:\n  <<: *x\n",
		"web:\n  max_requests: 1\n  max_requests: 2\n", "pmsample: {enabled: on, duty_cycle: .nan}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c config
		err := Decode(data, &c)
		if err == nil {
			return
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error spans several lines: %q", err)
		}
		var e *Error
		if errors.As(err, &e) && e.Line <= 0 {
			t.Fatalf("error without a line: %q", err)
		}
	})
}
