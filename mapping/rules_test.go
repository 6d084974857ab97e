package mapping

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

const goodRules = `# user rules
rules:
  - match: dram__bytes_read.sum.per_second
    name: cupti_memory_read_bytes_per_second
    help: Bytes read from device memory per second.
    otel_name: gpu.memory.read
  - regex: 'lts__t_sectors_srcunit_(tex|gcc)\.sum'
    name: cupti_l2_sectors_total
    labels:
      source: $1
`

func TestParseRulesGood(t *testing.T) {
	rules, err := ParseRules([]byte(goodRules), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || rules[0].source != "rules.yaml:3" || rules[1].source != "rules.yaml:7" {
		t.Fatalf("rules %+v", rules)
	}
	m, err := New(rules...)
	if err != nil {
		t.Fatal(err)
	}
	met, err := m.Map("dram__bytes_read.sum.per_second", pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "byte"})
	if err != nil {
		t.Fatal(err)
	}
	if met.Desc.Name != "cupti_memory_read_bytes_per_second" || met.Max.Name != "cupti_memory_read_max_bytes_per_second" ||
		met.Desc.OTelName != "gpu.memory.read" || met.Max.OTelName != "gpu.memory.read.max" || met.Desc.OTelUnit != "By/s" {
		t.Errorf("match rule: %+v %+v", met.Desc, met.Max)
	}
	p := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "l2_sector"}
	tex, err := m.Map("lts__t_sectors_srcunit_tex.sum", p)
	if err != nil {
		t.Fatal(err)
	}
	gcc, err := m.Map("lts__t_sectors_srcunit_gcc.sum", p)
	if err != nil {
		t.Fatal(err)
	}
	if tex.Desc != gcc.Desc || tex.Desc.Name != "cupti_l2_sectors_total" ||
		tex.Labels[0] != (snapshot.Label{Name: "source", Value: "tex"}) || gcc.Labels[0] != (snapshot.Label{Name: "source", Value: "gcc"}) {
		t.Errorf("regex rule: %+v %v / %+v %v", tex.Desc, tex.Labels, gcc.Desc, gcc.Labels)
	}
	if got := tex.Desc.LabelNames[len(snapshot.DeviceLabelNames):]; len(got) != 1 || got[0] != "source" {
		t.Errorf("label names %v", tex.Desc.LabelNames)
	}
}

func TestParseRulesEmpty(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "rules: []\n"} {
		rules, err := ParseRules([]byte(in), "empty.yaml")
		if err != nil || len(rules) != 0 {
			t.Errorf("ParseRules(%q) = %v, %v", in, rules, err)
		}
	}
}

// TestParseRulesErrors checks that each bad file is refused with the file, the line where
// it can, and the cause.
func TestParseRulesErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"unknown key", "rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n    nmae: y\n",
			"r.yaml: line 4: field nmae not found"},
		{"unknown top key", "rule:\n  - match: dram__bytes.sum\n", "line 1: field rule not found"},
		{"not a list", "rules: {match: x}\n", "r.yaml: line 1: cannot unmarshal"},
		{"bad yaml", "rules: [\n", "r.yaml"},
		{"two documents", "rules: []\n---\nrules: []\n", "one YAML document"},
		{"both", "rules:\n  - match: dram__bytes.sum\n    regex: x\n    name: cupti_x_total\n", "rule r.yaml:2: set exactly one of match"},
		{"neither", "rules:\n  - name: cupti_x_total\n", "rule r.yaml:2: set exactly one"},
		{"bad match", "rules:\n  - match: dram_bytes.sum\n    name: cupti_x_total\n", `rule r.yaml:2: match: parse metric name "dram_bytes.sum": no "__"`},
		{"base match", "rules:\n  - match: dram__bytes\n    name: cupti_x_total\n", "is a base metric"},
		{"bad regex", "rules:\n  - regex: 'dram__(bytes'\n    name: cupti_x_total\n", "rule r.yaml:2: bad regex"},
		{"no name", "rules:\n  - match: dram__bytes.sum\n", "rule r.yaml:2: name is missing"},
		{"bad name", "rules:\n  - match: dram__bytes.sum\n    name: dram_bytes_total\n", `bad name "dram_bytes_total"`},
		{"camel name", "rules:\n  - match: dram__bytes.sum\n    name: cupti_dramBytes_total\n", "bad name"},
		{"template in match rule", "rules:\n  - match: dram__bytes.sum\n    name: cupti_$1_total\n", "bad name"},
		{"bad label", "rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n    labels: {Dir: rx}\n", `bad label name "Dir"`},
		{"reserved label", "rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n    labels: {gpu: \"1\"}\n", `label "gpu" is reserved`},
		{"empty label", "rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n    labels: {dir: \"\"}\n", "empty value"},
		{"bad otel", "rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n    otel_name: 1gpu\n", "bad otel_name"},
		{"two line help", "rules:\n  - match: dram__bytes.sum\n    name: cupti_x_bytes_total\n    help: \"a\\nb\"\n", "one line"},
		{"same match", "rules:\n  - match: dram__bytes.sum\n    name: cupti_a_bytes_total\n  - match: dram__bytes.sum\n    name: cupti_b_bytes_total\n",
			"rule r.yaml:4: dram__bytes.sum is already mapped by rule r.yaml:2"},
		{"same regex", "rules:\n  - regex: a\n    name: cupti_a\n  - regex: a\n    name: cupti_b\n", "rule r.yaml:4: regex \"a\" repeats rule r.yaml:2"},
		{"collision", "rules:\n  - match: dram__bytes_read.sum\n    name: cupti_dram_bytes_total\n  - match: dram__bytes_write.sum\n    name: cupti_dram_bytes_total\n",
			"rule r.yaml:4: cupti_dram_bytes_total{} collides with rule r.yaml:2"},
	}
	for _, tt := range tests {
		_, err := ParseRules([]byte(tt.in), "r.yaml")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error spans lines: %q", tt.name, err)
		}
	}
}

// TestRulesCollideWithLabels checks that equal names with different labels do not collide,
// equal labels do.
func TestRulesCollideWithLabels(t *testing.T) {
	in := "rules:\n  - match: a__b.sum\n    name: cupti_x_total\n    labels: {d: rx}\n  - match: a__c.sum\n    name: cupti_x_total\n    labels: {d: %s}\n"
	if _, err := ParseRules([]byte(strings.Replace(in, "%s", "tx", 1)), "r"); err != nil {
		t.Errorf("different labels: %v", err)
	}
	if _, err := ParseRules([]byte(strings.Replace(in, "%s", "rx", 1)), "r"); err == nil {
		t.Error("same labels: no error")
	}
}

func TestNewChecksRules(t *testing.T) {
	if _, err := New(Rule{Match: "dram__bytes.sum", Name: "x"}); err == nil || !strings.Contains(err.Error(), "rule #1: bad name") {
		t.Errorf("New with a bad rule: %v", err)
	}
	if _, err := New(Rule{Regex: "(", Name: "cupti_x"}); err == nil || !strings.Contains(err.Error(), "bad regex") {
		t.Errorf("New with a bad regex: %v", err)
	}
}

func TestLoadRulesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(goodRules), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, err := LoadRulesFile(path)
	if err != nil || len(rules) != 2 || rules[0].source != path+":3" {
		t.Fatalf("LoadRulesFile: %v %+v", err, rules)
	}
	_, err = LoadRulesFile(filepath.Join(t.TempDir(), "missing.yaml"))
	if err == nil || !strings.Contains(err.Error(), "load mapping rules") {
		t.Errorf("missing file: %v", err)
	}
}

// TestLoadRulesFileTooLarge: a rules file over MaxRulesFileBytes is refused with its size,
// before the YAML decoder sees it; one of exactly that size is read.
func TestLoadRulesFileTooLarge(t *testing.T) {
	fits := []byte(goodRules + "#" + strings.Repeat("x", MaxRulesFileBytes-len(goodRules)-2) + "\n")
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, fits, 0o600); err != nil {
		t.Fatal(err)
	}
	if rules, err := LoadRulesFile(path); err != nil || len(rules) != 2 {
		t.Fatalf("a rules file of exactly %d bytes: %v %+v", len(fits), err, rules)
	}
	if err := os.WriteFile(path, append(fits, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s: %d bytes, more than the %d a mapping rules file may have", path, len(fits)+1, MaxRulesFileBytes)
	if _, err := LoadRulesFile(path); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err %v, want it to say %q", err, want)
	}
}
