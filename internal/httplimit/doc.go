// Package httplimit bounds what HTTP clients can make a server hold: a Listener caps the
// connections open at once (a newcomer past the cap replaces the connection waiting longest
// without a request, else is closed at once), Settings put timeouts and a header limit on
// each connection, and Descriptors reads the descriptor limit the caps must fit in. What
// the limits close is counted in Metrics.
package httplimit
