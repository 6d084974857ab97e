package strictyaml

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// duration is a leaf with its own UnmarshalYAML, as the exporter's Duration.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit, e.g. 250ms", n.Value)
	}
	*d = duration(v)
	return nil
}

type config struct {
	Web struct {
		ListenAddress string `yaml:"listen_address"`
		MaxRequests   int    `yaml:"max_requests"`
	} `yaml:"web"`
	PMSample struct {
		Enabled   bool     `yaml:"enabled"`
		Interval  duration `yaml:"interval"`
		Metrics   []string `yaml:"metrics"`
		DutyCycle float64  `yaml:"duty_cycle"`
	} `yaml:"pmsample"`
	OTLP struct {
		Header map[string]string `yaml:"header"`
	} `yaml:"otlp"`
	Ignored string `yaml:"-"`
}

func TestDecodeAccepts(t *testing.T) {
	var c config
	c.Web.ListenAddress = ":9477"
	err := Decode([]byte(`
base: &base {enabled: yes}
`), &c)
	if err == nil || !strings.Contains(err.Error(), "unknown key") {
		t.Fatalf("top-level anchor key accepted: %v", err)
	}
	err = Decode([]byte(`
pmsample: &pm
  enabled: true
  interval: 250ms
  metrics: [a, b]
  duty_cycle: .5
web:
  max_requests: 3
otlp:
  header: {x-tenant: gpu, n: 5}
`), &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Web.ListenAddress != ":9477" || c.Web.MaxRequests != 3 || !c.PMSample.Enabled ||
		c.PMSample.Interval != duration(250*time.Millisecond) || len(c.PMSample.Metrics) != 2 ||
		c.PMSample.DutyCycle != 0.5 || c.OTLP.Header["n"] != "5" {
		t.Errorf("decoded %+v", c)
	}
	// A null keeps the value; an empty document keeps everything.
	if err := Decode([]byte("web:\n  listen_address:\npmsample:\n"), &c); err != nil || c.Web.ListenAddress != ":9477" {
		t.Errorf("null: %v, %q", err, c.Web.ListenAddress)
	}
	for _, doc := range []string{"", "# only a comment\n", "~\n"} {
		if err := Decode([]byte(doc), &c); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
	// A merge key takes the keys of the section it is in.
	var m config
	if err := Decode([]byte("pmsample: &p {interval: 2ms}\nweb: {max_requests: 1}\n"), &m); err != nil {
		t.Fatal(err)
	}
	if err := Decode([]byte("x: &p {interval: 2ms}\n"), &m); err == nil {
		t.Error("unknown top-level key accepted")
	}
}

func TestDecodeMerge(t *testing.T) {
	type section struct {
		A int `yaml:"a"`
		B int `yaml:"b"`
	}
	var c struct {
		X section `yaml:"x"`
		Y section `yaml:"y"`
	}
	if err := Decode([]byte("x: &x {a: 1}\ny:\n  <<: *x\n  b: 2\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Y.A != 1 || c.Y.B != 2 {
		t.Errorf("merged %+v", c.Y)
	}
	err := Decode([]byte("x: &x {c: 1}\ny:\n  <<: [*x]\n"), &c)
	if err == nil || !strings.Contains(err.Error(), "x.c: unknown key") {
		t.Errorf("merge of an unknown key: %v", err)
	}
}

// Each refusal names the line, the dotted path, what was expected and what was found, in one line.
func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"pmsample: 5\n", `line 1: pmsample: want a mapping of keys (enabled, interval, metrics, duty_cycle), got "5"`},
		{"pmsample:\n  intervall: 1ms\n", "line 2: pmsample.intervall: unknown key; did you mean pmsample.interval?"},
		{"web:\n  listen_adress: :1\n", "line 2: web.listen_adress: unknown key; did you mean web.listen_address?"},
		{"pmsampling:\n  interval: 1ms\n", "line 1: pmsampling: unknown key; did you mean pmsample?"},
		{"web:\n  port: 9477\n", "line 2: web.port: unknown key; web has listen_address, max_requests"},
		{"colour: red\n", "line 1: colour: unknown key; the top level has web, pmsample, otlp"},
		{"Ignored: x\n", "line 1: Ignored: unknown key"},
		{"pmsample:\n  interval: 10x\n", `line 2: pmsample.interval: invalid duration "10x": want a number with a unit, e.g. 250ms`},
		{"pmsample:\n  interval: [1ms]\n", `line 2: pmsample.interval: invalid duration ""`},
		{"pmsample:\n  enabled: maybe\n", `line 2: pmsample.enabled: want true or false, got "maybe"`},
		{"pmsample:\n  duty_cycle: half\n", `line 2: pmsample.duty_cycle: want a number, got "half"`},
		{"web:\n  max_requests: 1.5\n", `line 2: web.max_requests: want a whole number, got "1.5"`},
		{"web:\n  max_requests: 99999999999999999999999\n", `web.max_requests: want a whole number`},
		{"web:\n  listen_address: {a: 1}\n", `line 2: web.listen_address: want a string, got a mapping`},
		{"pmsample:\n  metrics: a,b\n", `line 2: pmsample.metrics: want a list of strings, e.g. [a, b], got "a,b"`},
		{"pmsample:\n  metrics:\n    - a\n    - [b]\n", `line 4: pmsample.metrics[1]: want a string, got a list`},
		{"otlp:\n  header: [a]\n", `line 2: otlp.header: want a mapping of names to strings, got a list`},
		{"otlp:\n  header:\n    x-tenant: {a: b}\n", `line 3: otlp.header.x-tenant: want a string, got a mapping`},
		{"web:\n  max_requests: 1\n  max_requests: 2\n", `line 3: web.max_requests: given twice (first on line 2)`},
		{"[1, 2]\n", `want a mapping of keys (web, pmsample, otlp), got a list`},
		{"web: [\n", `line 1: did not find expected node content`},
		{"web:\n  ? [a]\n  : 1\n", `line 2: web: want a key name, got a list`},
		{"pmsample: {enabled: " + strings.Repeat("x", 100) + "}\n", `got "` + strings.Repeat("x", 40) + `..."`},
	} {
		var c config
		err := Decode([]byte(tc.doc), &c)
		if err == nil {
			t.Errorf("%q accepted", tc.doc)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.doc, err, tc.want)
		}
		if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "struct") || strings.Contains(err.Error(), "yaml:") {
			t.Errorf("%q: error has Go internals or several lines: %q", tc.doc, err)
		}
	}
}

func TestDecodeErrorType(t *testing.T) {
	var c config
	err := Decode([]byte("web:\n  max_requests: x\n"), &c)
	var e *Error
	if !errors.As(err, &e) || e.Line != 2 || e.Path != "web.max_requests" {
		t.Fatalf("err %#v", err)
	}
	if err := Decode([]byte("a: 1"), c); err == nil {
		t.Error("a struct value (not a pointer) accepted")
	}
}

// An alias used many times is checked once per type: a billion-laughs document is
// refused quickly, by the walk or by yaml.v3's alias limit.
func TestDecodeAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 20; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	var c struct {
		Lists map[string][]any `yaml:"lists"`
	}
	start := time.Now()
	err := Decode([]byte("lists:\n"+indent(b.String())), &c)
	if err == nil {
		t.Fatal("alias bomb accepted")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	t.Log(err)
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"interval", "intervall", 1}, {"listen_adress", "listen_address", 1}, {"abc", "", 3}, {"kitten", "sitting", 3}} {
		if d := distance(tc.a, tc.b); d != tc.d {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, d, tc.d)
		}
	}
}

// A section made of several packages' parts (`yaml:",inline"`) takes and checks their keys as
// its own, in field order, as yaml.v3 decodes them.
func TestDecodeInline(t *testing.T) {
	type sampler struct {
		Interval duration `yaml:"interval"`
		Enabled  bool     `yaml:"enabled"`
	}
	type idle struct {
		Poll duration `yaml:"idle_poll"`
	}
	var c struct {
		PMSample struct {
			sampler `yaml:",inline"`
			Idle    idle `yaml:",inline"`
			Backoff bool `yaml:"backoff"`
		} `yaml:"pmsample"`
	}
	if err := Decode([]byte("pmsample:\n  interval: 2ms\n  idle_poll: 20ms\n  backoff: true\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.PMSample.Interval != duration(2*time.Millisecond) || c.PMSample.Idle.Poll != duration(20*time.Millisecond) || !c.PMSample.Backoff {
		t.Fatalf("decoded %+v", c.PMSample)
	}
	for _, tc := range []struct{ doc, want string }{
		{"pmsample:\n  idle_pol: 1ms\n", "line 2: pmsample.idle_pol: unknown key; did you mean pmsample.idle_poll?"},
		{"pmsample:\n  colour: red\n", "line 2: pmsample.colour: unknown key; pmsample has interval, enabled, idle_poll, backoff"},
		{"pmsample:\n  idle_poll: 10x\n", `line 2: pmsample.idle_poll: invalid duration "10x"`},
		{"pmsample:\n  idle_poll: 1ms\n  idle_poll: 2ms\n", "line 3: pmsample.idle_poll: given twice (first on line 2)"},
	} {
		err := Decode([]byte(tc.doc), &c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got  %v\n want %s", tc.doc, err, tc.want)
		}
	}
}
