// Package demo holds the recording that `cupti-exporter --demo` replays, embedded in the
// binary, and the generator of its synthetic version.
//
// The embedded file is synthetic (its header says so) until a recording made on a GPU
// machine replaces it: regenerate with `go test ./recording/demo -update` or
// `go run ./recording/internal/gensynthetic -o recording/demo/demo.cuptirec`.
package demo
