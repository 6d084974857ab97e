package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Error is a value or key the target cannot take.
type Error struct {
	Line int    // 1-based line of the offending node; 0 when unknown
	Path string // dotted key path, e.g. pmsample.interval or otlp.header.x-tenant; "" for the document
	Msg  string // what was wrong, one line
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		path := e.Path
		if strings.ContainsFunc(path, func(r rune) bool { return !unicode.IsPrint(r) }) {
			path = strconv.Quote(path) // a key from the file with a line break or control character
		}
		b.WriteString(path + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Decode decodes the first YAML document of data into v, a pointer to a struct,
// over the values v already holds (an empty document or a null leaves them).
// Keys are matched to fields by their yaml tag, those of inline struct fields included;
// a key the struct does not have, a value of the wrong kind and a key given twice
// are refused with an *Error; a syntax error is returned as yaml.v3 words it,
// without its "yaml: " prefix.
func Decode(data []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("strictyaml: Decode needs a pointer to a struct, got %T", v)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		return errors.New(oneLine(strings.TrimPrefix(err.Error(), "yaml: ")))
	}
	if len(doc.Content) == 0 {
		return nil
	}
	c := checker{seen: map[seenKey]bool{}}
	if err := c.check(doc.Content[0], rv.Elem().Type(), ""); err != nil {
		return err
	}
	if err := doc.Decode(v); err != nil { // what the walk does not judge (e.g. excessive aliasing)
		return errors.New(oneLine(strings.TrimPrefix(err.Error(), "yaml: ")))
	}
	return nil
}

// checker walks a node tree beside a Go type.
type checker struct {
	seen map[seenKey]bool // (node, type) pairs already checked: aliases are checked once
}

type seenKey struct {
	n *yaml.Node
	t reflect.Type
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// check reports the first thing in n that a value of type t cannot take.
func (c *checker) check(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if c.seen[seenKey{n, t}] {
		return nil
	}
	c.seen[seenKey{n, t}] = true
	if isNull(n) {
		return nil // yaml.v3 leaves the value as it was (and empties lists and maps)
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return decodeLeaf(n, t, path, "")
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil // anything goes; yaml.v3 bounds aliasing when it decodes
	case reflect.Struct:
		return c.checkStruct(n, t, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return &Error{n.Line, path, "want " + expected(t) + ", got " + found(n)}
		}
		for i, item := range n.Content {
			if err := c.check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return &Error{n.Line, path, "want " + expected(t) + ", got " + found(n)}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if err := c.check(k, t.Key(), path); err != nil {
				return err
			}
			if err := c.check(val, t.Elem(), join(path, k.Value)); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind != yaml.ScalarNode || (isInteger(t) && n.ShortTag() == "!!float") { // yaml.v3 would cut 1.5 to 1
		return &Error{n.Line, path, "want " + expected(t) + ", got " + found(n)}
	}
	return decodeLeaf(n, t, path, expected(t))
}

// checkStruct checks a mapping against the fields of struct type t.
func (c *checker) checkStruct(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return &Error{n.Line, path, "want " + expected(t) + ", got " + found(n)}
	}
	fields := fieldsOf(t)
	first := map[string]int{} // key -> line it was first given on
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return &Error{k.Line, path, "want a key name, got " + found(k)}
		}
		if k.Tag == "!!merge" { // <<: *anchor, or a list of them: the same keys as here
			if err := c.checkMerge(val, t, path); err != nil {
				return err
			}
			continue
		}
		p := join(path, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			return &Error{k.Line, p, unknownKey(k.Value, path, t)}
		}
		if line, dup := first[k.Value]; dup {
			return &Error{k.Line, p, fmt.Sprintf("given twice (first on line %d)", line)}
		}
		first[k.Value] = k.Line
		if err := c.check(val, f.Type, p); err != nil {
			return err
		}
	}
	return nil
}

// checkMerge checks the value of a merge key: a mapping, or a list of mappings.
func (c *checker) checkMerge(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.SequenceNode {
		return c.check(n, t, path)
	}
	for _, m := range n.Content {
		if err := c.check(m, t, path); err != nil {
			return err
		}
	}
	return nil
}

// decodeLeaf decodes n into a scratch value of type t; want, when set, replaces
// yaml.v3's wording of a failure (which names Go types) with what was expected.
func decodeLeaf(n *yaml.Node, t reflect.Type, path, want string) error {
	err := n.Decode(reflect.New(t).Interface())
	switch {
	case err == nil:
		return nil
	case want != "":
		return &Error{n.Line, path, "want " + want + ", got " + found(n)}
	}
	return &Error{n.Line, path, oneLine(strings.TrimPrefix(err.Error(), "yaml: "))}
}

// fieldsOf maps the yaml keys of struct type t to its fields; the keys of an inline struct
// field (`yaml:",inline"`) are t's own, as yaml.v3 decodes them, and their fields' Index is
// the path from t.
func fieldsOf(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" && f.Type.Kind() == reflect.Struct && (f.IsExported() || f.Anonymous) {
			for k, inner := range fieldsOf(f.Type) {
				inner.Index = append([]int{i}, inner.Index...)
				out[k] = inner
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

// keysOf lists the yaml keys of struct type t, in field order.
func keysOf(t reflect.Type) []string {
	fields := fieldsOf(t)
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return slices.Compare(fields[keys[i]].Index, fields[keys[j]].Index) < 0 })
	return keys
}

// unknownKey says that key is not a key of struct type t (at path), naming the
// nearest valid key or, when none is near, all of them.
func unknownKey(key, path string, t reflect.Type) string {
	keys := keysOf(t)
	best, bestD := "", -1
	for _, k := range keys {
		if d := distance(key, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" && bestD <= max(2, len(key)/3, len(best)/3) {
		return "unknown key; did you mean " + join(path, best) + "?"
	}
	where := path
	if where == "" {
		where = "the top level"
	}
	if len(keys) == 0 {
		return "unknown key; " + where + " takes no keys"
	}
	return "unknown key; " + where + " has " + strings.Join(keys, ", ")
}

// distance is the Levenshtein distance between a and b (bytes; keys are ASCII).
// Keys longer than 64 bytes are not near anything, which bounds the work.
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// expected says in YAML terms what a value of type t is.
func expected(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "a mapping of keys (" + strings.Join(keysOf(t), ", ") + ")"
	case reflect.Slice:
		return "a list of " + plural(t.Elem()) + ", e.g. [a, b]"
	case reflect.Map:
		return "a mapping of names to " + plural(t.Elem())
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return "a " + t.Kind().String()
}

func plural(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Bool:
		return "true or false values"
	case reflect.Float32, reflect.Float64:
		return "numbers"
	}
	if isInteger(t) {
		return "whole numbers"
	}
	return "values"
}

func isInteger(t reflect.Type) bool { return t.Kind() >= reflect.Int && t.Kind() <= reflect.Uintptr }

// found describes n for an error: its kind, or a scalar's value (quoted, cut short).
func found(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

// isNull reports whether n is an explicit or implicit null (key: with no value).
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// oneLine folds a multi-line yaml.v3 message into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
