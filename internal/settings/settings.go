// Package settings holds the value types of the exporter's configuration that YAML and flags
// write as text: durations ("250ms") and byte sizes ("256MiB"). The packages that own a
// section of the configuration declare their fields with them.
package settings

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written as "250ms", "1us", "15s" in YAML.
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML parses a duration (strictyaml adds the line and key to an error).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a duration such as 250ms, got a %s", kindName(n.Kind))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit (us, ms, s, m, h), e.g. 250ms", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as text.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

// ByteSize is a size in bytes written as "256MiB", "1GiB", "65536" in YAML and flags.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	n      int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}}

// ParseByteSize reads a whole number with an optional unit (B, KiB, MiB, GiB, KB, MB, GB).
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q: want a whole number with a unit (B, KiB, MiB, GiB), e.g. 256MiB", s)
	}
	return ByteSize(n * mult), nil
}

func (b ByteSize) String() string {
	for _, u := range byteUnits[:3] {
		if b >= ByteSize(u.n) && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// UnmarshalYAML parses a size (strictyaml adds the line and key to an error).
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("want a size such as 256MiB, got a %s", kindName(n.Kind))
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalYAML writes the size as text.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }
