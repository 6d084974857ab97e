// Package strictyaml decodes a YAML configuration file into a Go struct and
// refuses what the struct cannot hold, with errors a user can act on: the line,
// the key's dotted path (pmsample.interval), what was expected there and what
// was found, and for an unknown key the nearest valid one.
//
// yaml.v3 alone reports a wrong type with the Go type (a whole struct and its
// tags for a section given a number) and an unknown key without its section. So
// Decode first walks yaml.v3's Node tree beside the struct's type, checking each
// key and each value, then lets yaml.v3 decode the tree that passed.
//
// The walk is linear in the document: an anchor used many times is checked once
// per Go type it meets, so alias bombs cost no more than the nodes they name
// (yaml.v3's own decoder refuses excessive aliasing when it decodes).
package strictyaml
