/* queue.c: the bounded queue of wire records between CUPTI's completion
 * callback (producer) and the sender thread (consumer). A full queue never
 * blocks: the producer keeps what fits and the caller counts the rest. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static struct cx_record *ring;
static size_t cap, head, len; /* head = oldest */
static uint64_t pushed;        /* records ever pushed */
static int woken;

int cx_queue_init(size_t capacity)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &a);
	pthread_condattr_destroy(&a);
	ring = malloc(capacity * sizeof *ring); /* pages are touched only when used */
	if (!ring)
		return -1;
	cap = capacity;
	return 0;
}

size_t cx_queue_push(const struct cx_record *r, size_t n)
{
	pthread_mutex_lock(&mu);
	size_t room = cap - len, k = n < room ? n : room;
	for (size_t done = 0; done < k;) {
		size_t tail = (head + len) % cap, run = cap - tail;
		if (run > k - done)
			run = k - done;
		memcpy(&ring[tail], &r[done], run * sizeof *r);
		len += run, done += run;
	}
	pushed += k;
	int was_empty = len == k && k > 0;
	pthread_mutex_unlock(&mu);
	if (was_empty)
		pthread_cond_signal(&cv);
	return k;
}

size_t cx_queue_pop(struct cx_record *out, size_t max, int timeout_ms)
{
	pthread_mutex_lock(&mu);
	if (!len && timeout_ms > 0) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		while (!len && !woken && pthread_cond_timedwait(&cv, &mu, &ts) != ETIMEDOUT)
			;
	}
	woken = 0;
	size_t k = len < max ? len : max;
	for (size_t done = 0; done < k;) {
		size_t run = cap - head;
		if (run > k - done)
			run = k - done;
		memcpy(&out[done], &ring[head], run * sizeof *out);
		head = (head + run) % cap, len -= run, done += run;
	}
	pthread_mutex_unlock(&mu);
	return k;
}

void cx_queue_wake(void)
{
	pthread_mutex_lock(&mu);
	woken = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

size_t cx_queue_discard(void)
{
	pthread_mutex_lock(&mu);
	size_t n = len;
	head = 0, len = 0;
	pthread_mutex_unlock(&mu);
	return n;
}

uint64_t cx_queue_pushed(void)
{
	pthread_mutex_lock(&mu);
	uint64_t n = pushed;
	pthread_mutex_unlock(&mu);
	return n;
}
