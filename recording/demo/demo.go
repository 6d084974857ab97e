package demo

import _ "embed"

//go:embed demo.cuptirec
var embedded []byte

// Recording returns the embedded demo recording (read-only).
func Recording() []byte { return embedded }
