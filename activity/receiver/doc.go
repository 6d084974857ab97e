// Package receiver is the exporter's end of the activity socket: a Unix stream socket on
// which every traced process (the injection library of activity/inject) connects and
// streams frames in the format of docs/wire-format.md. One goroutine and one
// activity/wire Decoder serve each connection and feed an activity.Aggregator.
//
// A connection that sends a malformed frame is closed alone and counted
// (cupti_activity_dropped_connections_total{reason="malformed"}); a connection over the
// configured limit is refused and counted (reason="limit"). A process counts as connected
// from its hello until its goodbye or the end of its connection.
//
// The package is separate from activity because activity/wire imports activity (for
// Record and Process), so the socket server, which needs both, cannot live in activity.
package receiver
