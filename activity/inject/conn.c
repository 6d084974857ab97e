/* conn.c: the non-blocking Unix stream socket to the exporter, reconnecting
 * with exponential backoff (100 ms doubling to 5 s). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "inject.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

void cx_conn_init(struct cx_conn *c)
{
	c->fd = -1;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->next_try_ns = 0;
}

static void arm_backoff(struct cx_conn *c, uint64_t now_ns)
{
	c->next_try_ns = now_ns + (uint64_t)c->backoff_ms * 1000000u;
	c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

int cx_conn_try_open(struct cx_conn *c, const char *path, uint64_t now_ns)
{
	if (c->fd >= 0)
		return 1;
	if (now_ns < c->next_try_ns)
		return 0;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		arm_backoff(c, now_ns);
		return 0;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		/* A Unix socket connects at once or not at all (EAGAIN: backlog full). */
		cx_log(2, "connecting to %s: %s (retrying in %d ms)", path, strerror(errno), c->backoff_ms);
		close(fd);
		arm_backoff(c, now_ns);
		return 0;
	}
	c->fd = fd;
	c->backoff_ms = BACKOFF_MIN_MS;
	cx_log(2, "connected to %s", path);
	return 1;
}

void cx_conn_close(struct cx_conn *c, uint64_t now_ns)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	arm_backoff(c, now_ns);
}

long cx_conn_write(struct cx_conn *c, const uint8_t *p, size_t n, uint64_t now_ns)
{
	if (c->fd < 0)
		return -1;
	ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w >= 0)
		return (long)w;
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
		return 0;
	cx_log(2, "writing to the exporter: %s (reconnecting)", strerror(errno));
	cx_conn_close(c, now_ns);
	return -1;
}

int cx_conn_wait_writable(struct cx_conn *c, int timeout_ms)
{
	struct pollfd pfd = {.fd = c->fd, .events = POLLOUT};
	return c->fd >= 0 && poll(&pfd, 1, timeout_ms) > 0;
}
