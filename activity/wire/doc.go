// Package wire encodes and decodes the activity wire format spoken between the
// injection library (activity/inject, C) and the exporter. The format is
// specified in docs/wire-format.md: length-prefixed frames (hello, strings,
// records, drops, goodbye) over a Unix stream socket, one connection per
// traced process.
//
// A Decoder reads one connection. It validates every frame against the
// documented limits before allocating, resolves kernel names through the
// connection's string table and never panics on hostile input. ReadInto reuses
// the caller's Message (and its Records slice), so a steady stream of record
// batches decodes without allocation.
//
// An Encoder writes the same format. It is used by tests and by Go test
// senders; the production sender is the C library.
//
// Neither type is safe for concurrent use.
package wire
