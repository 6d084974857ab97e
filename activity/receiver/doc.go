// Package receiver is the exporter's end of the activity socket: a Unix stream socket on
// which every traced process (the injection library of activity/inject) connects and
// streams frames in the format of docs/wire-format.md. One goroutine and one
// activity/wire Decoder serve each connection and feed an activity.Aggregator.
//
// A connection that sends a malformed frame is closed alone and counted
// (cupti_activity_dropped_connections_total{reason="malformed"}). The socket is open to every
// workload on the node, so every client is held to limits, and every refusal is counted and
// logged at most once a second per reason:
//
//   - a connection must say hello within the hello timeout (reason="hello_timeout");
//   - when the connection limit is reached, a newcomer replaces the oldest connection without
//     hello (evicted_no_hello), else one silent for the idle timeout (evicted_idle), else it
//     is refused (limit);
//   - with WithBudget, every connection's memory (a fixed share, its hello, frame buffers and
//     kernel-name table) is charged to one activity.Budget, shared with the Aggregator's
//     per-device state; a connection that would pass it, or its share of it, is refused or
//     closed (memory_budget), and what it held is released when it ends.
//
// Identity comes from the kernel (identity.go, docs/security.md): when a connection is
// accepted the server reads its peer's credentials (SO_PEERCRED) and /proc entry; the hello's
// PID and start time must agree or the connection is closed (identity_refused), and a verified
// process's PID, start time and cgroup are the kernel's. A peer the kernel cannot name is only
// claimed. Hello text that could not be a label is dropped once (sanitize.go). One verified
// identity (a container's cgroup) holds at most WithMaxConnectionsPerIdentity connections and
// a quarter of the budget; a verified newcomer may replace the claimed connection holding the
// most memory (evicted_claimed).
//
// A process counts as connected from its hello until its goodbye or the end of its
// connection.
//
// The package is separate from activity because activity/wire imports activity (for
// Record and Process), so the socket server, which needs both, cannot live in activity.
package receiver
