package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/snapshot"

	"gopkg.in/yaml.v3"

	"github.com/cupti-exporter/cupti-exporter/internal/strictyaml"
)

// Rule names the metrics that one Perfworks name (match) or a family of them (regex) becomes,
// instead of the derived name. In YAML, rules sit in a list under "rules":
//
//	rules:
//	  - match: dram__bytes_read.sum.per_second
//	    name: cupti_dram_read_bytes_per_second
//	  - regex: 'pcie__(read|write)_bytes\.sum'
//	    name: cupti_pcie_bytes_total
//	    labels: {op: $1}
//
// Name is the full name of the main series, unit and _total included; it must end the way
// the metric's unit and type require (Map says so when it does not). Regex rules match the
// whole Perfworks name and may use $1 or ${1} (${1} where a letter, digit or _ follows, as
// regexp.Expand reads "$1_x" as the group named "1_x") in Name, OTelName and label values.
// Without OTelName the OTel name follows Name (cupti. + its stem); without Help, a match rule
// keeps the derived help and a regex rule gets one help for all the metrics it matches.
type Rule struct {
	Match    string            `yaml:"match,omitempty"`     // one full Perfworks name, e.g. sm__cycles_active.avg.pct_of_peak_sustained_elapsed
	Regex    string            `yaml:"regex,omitempty"`     // or an RE2 expression over the full name (anchored)
	Name     string            `yaml:"name"`                // Prometheus name of the main series, e.g. cupti_sm_active_ratio
	Help     string            `yaml:"help,omitempty"`      // one line; derived from the Perfworks name when empty
	OTelName string            `yaml:"otel_name,omitempty"` // OpenTelemetry name; derived when empty
	Labels   map[string]string `yaml:"labels,omitempty"`    // constant labels, e.g. {direction: rx}

	otelAttributes []snapshot.Label // constant OTLP attributes (curated rules only), see Desc.OTelAttributes

	source string         // "file:line" or "rule N", for errors
	re     *regexp.Regexp // compiled Regex
}

// ruleFile is the layout of a rules file.
type ruleFile struct {
	Rules []Rule `yaml:"rules"`
}

var (
	promNameRE  = regexp.MustCompile(`^cupti_[a-z][a-z0-9_]*$`)
	labelNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	otelNameRE  = regexp.MustCompile(`^[a-zA-Z][-_./a-zA-Z0-9]{0,254}$`)
	templateRE  = regexp.MustCompile(`\$(\{[A-Za-z0-9_]+\}|[A-Za-z0-9_]+)`)
)

// reservedLabels may not be set by rules: the device labels, the attribution labels and
// the labels Prometheus gives a meaning.
var reservedLabels = append(append([]string{}, snapshot.DeviceLabelNames...), "pod", "namespace", "container", "le", "quantile", "job", "instance")

// MaxRulesFileBytes bounds a rules file, as the configuration file is bounded: the YAML
// decoder holds several times a file's size, and rules files are a few KiB.
const MaxRulesFileBytes = 1 << 20

// LoadRulesFile reads and checks a YAML rules file of at most MaxRulesFileBytes; see ParseRules.
func LoadRulesFile(path string) ([]Rule, error) {
	data, err := strictyaml.ReadFile(path, MaxRulesFileBytes, "a mapping rules file")
	if err != nil {
		return nil, fmt.Errorf("load mapping rules: %w", err)
	}
	return ParseRules(data, path)
}

// ParseRules decodes YAML rules strictly (an unknown key is an error naming its line),
// checks each rule (names, labels, regular expressions) and checks that no two rules
// collide. filename only labels the errors.
func ParseRules(data []byte, filename string) ([]Rule, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("parse mapping rules %s: %s", filename, yamlErr(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse mapping rules %s: want one YAML document, found more (remove the --- separators)", filename)
	}
	lines := ruleLines(data)
	for i := range f.Rules {
		f.Rules[i].source = fmt.Sprintf("%s:%d", filename, lineAt(lines, i))
		if err := f.Rules[i].check(); err != nil {
			return nil, err
		}
	}
	if err := checkCollisions(f.Rules); err != nil {
		return nil, err
	}
	return f.Rules, nil
}

// yamlErr flattens yaml.v3's multi-line errors ("line 3: field foo not found ...") to one line.
func yamlErr(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(msg)
}

// ruleLines returns the line of each item of the top-level "rules" list.
func ruleLines(data []byte) []int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "rules" {
			var out []int
			for _, item := range m.Content[i+1].Content {
				out = append(out, item.Line)
			}
			return out
		}
	}
	return nil
}

func lineAt(lines []int, i int) int {
	if i < len(lines) {
		return lines[i]
	}
	return 0
}

// where names the rule in errors.
func (r *Rule) where() string {
	if r.source != "" {
		return "rule " + r.source
	}
	return "rule"
}

// check validates one rule and compiles its regular expression.
func (r *Rule) check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("mapping %s: %s", r.where(), fmt.Sprintf(format, args...))
	}
	switch {
	case (r.Match == "") == (r.Regex == ""):
		return fail("set exactly one of match (a Perfworks name) or regex")
	case r.Match != "":
		n, err := ParseName(r.Match)
		if err != nil {
			return fail("match: %v", err)
		}
		if n.Rollup == "" && n.Submetric == "" {
			return fail("match %q is a base metric: name a full metric, e.g. %s.sum or %s.pct", r.Match, r.Match, r.Match)
		}
	default:
		re, err := regexp.Compile(`^(?:` + r.Regex + `)$`)
		if err != nil {
			return fail("bad regex %q: %s", r.Regex, regexReason(err))
		}
		r.re = re
	}
	templated := func(s string) string {
		if r.re == nil {
			return s
		}
		return templateRE.ReplaceAllString(s, "x")
	}
	if r.Name == "" {
		return fail("name is missing")
	}
	if !promNameRE.MatchString(templated(r.Name)) {
		return fail("bad name %q: want %s followed by lowercase letters, digits and _ (e.g. cupti_dram_read_bytes_per_second)", r.Name, NamePrefix)
	}
	if strings.ContainsAny(r.Help, "\r\n") {
		return fail("help must be one line")
	}
	if r.OTelName != "" && !otelNameRE.MatchString(templated(r.OTelName)) {
		return fail("bad otel_name %q: want a letter, then letters, digits, _ . - / (at most 255)", r.OTelName)
	}
	for k, v := range r.Labels {
		if !labelNameRE.MatchString(k) {
			return fail("bad label name %q: want lowercase letters, digits and _, starting with a letter", k)
		}
		if slices.Contains(reservedLabels, k) {
			return fail("label %q is reserved (set by the exporter or by Prometheus): choose another name", k)
		}
		if v == "" {
			return fail("label %q has an empty value", k)
		}
	}
	return nil
}

// labelList returns the rule's labels sorted by name, values expanded for regex matches.
func (r *Rule) labelList(expand func(string) string) []snapshot.Label {
	out := make([]snapshot.Label, 0, len(r.Labels))
	for k, v := range r.Labels {
		out = append(out, snapshot.Label{Name: k, Value: expand(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// seriesKey identifies a series family member: name plus constant labels.
func seriesKey(name string, labels []snapshot.Label) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range labels {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// checkCollisions reports two rules for the same Perfworks name or the same regex, and two
// exact rules that would produce the same series (name and labels).
func checkCollisions(rules []Rule) error {
	byMatch := map[string]*Rule{}
	byRegex := map[string]*Rule{}
	bySeries := map[string]*Rule{}
	for i := range rules {
		r := &rules[i]
		if r.Regex != "" {
			if o := byRegex[r.Regex]; o != nil {
				return fmt.Errorf("mapping %s: regex %q repeats %s", r.where(), r.Regex, o.where())
			}
			byRegex[r.Regex] = r
			continue
		}
		if o := byMatch[r.Match]; o != nil {
			return fmt.Errorf("mapping %s: %s is already mapped by %s: keep one", r.where(), r.Match, o.where())
		}
		byMatch[r.Match] = r
		key := seriesKey(r.Name, r.labelList(func(s string) string { return s }))
		if o := bySeries[key]; o != nil {
			return fmt.Errorf("mapping %s: %s collides with %s (%s): give one another name or label", r.where(), key, o.where(), o.Match)
		}
		bySeries[key] = r
	}
	return nil
}

// regexReason is what is wrong with a regex, on one line: regexp's own message quotes the
// offending part raw, and a regex from a file may hold a line break (FuzzParseRules).
func regexReason(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return fmt.Sprintf("%s: %q", se.Code, se.Expr)
	}
	return fmt.Sprintf("%q", err.Error())
}
