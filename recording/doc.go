// Package recording writes, reads and replays cupti-exporter recordings: a versioned,
// append-only file of the device list, the metric catalog, PM sample batches and
// activity-process events, as the exporter saw them.
//
// The format (docs/recording-format.md) is a 12-byte file header followed by frames:
// a type byte, a payload length, a timestamp, the payload and a CRC-32C. A file can be
// read while it is still being written; a cut-off or damaged file is reported with the
// byte offset of the first bad frame ("truncated at byte N"), never with a panic, and the
// reader never allocates more than a frame's declared (and bounded) length.
//
// Writer is used by `cupti-exporter record`; Reader returns typed events; Replayer
// implements pmdata.Source (and feeds an ActivitySink) for `replay` and `--demo`.
package recording
