/* buffers.c: the bounded pool of CUPTI activity buffers. Buffers are
 * allocated lazily up to the bound and reused. When the pool is empty a
 * request is refused (NULL, counted) where CUPTI tolerates it (API >= 13.0);
 * older CUPTI segfaults on NULL, so there an extra buffer is allocated and
 * freed on completion (counted in the exit log line, not a loss). */
#include <stdlib.h>
#include <string.h>

#include "inject.h"

#define HDR 64 /* bytes before the buffer CUPTI sees: keeps 8-byte alignment */
#define TAG_POOL 0x504f4f4cu
#define TAG_EXTRA 0x45585452u

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t **free_list; /* buffers ready for reuse */
static int nfree, allocated, capacity, outstanding, refuse;
static size_t bufsize;
static atomic_ulong extras;

int cx_pool_init(int count, size_t size, int may_refuse)
{
	free_list = calloc((size_t)count, sizeof *free_list);
	if (!free_list)
		return -1;
	capacity = count, bufsize = size, refuse = may_refuse;
	return 0;
}

static uint8_t *alloc_buffer(uint32_t tag)
{
	uint8_t *raw = aligned_alloc(HDR, HDR + bufsize);
	if (!raw)
		return NULL;
	memcpy(raw, &tag, sizeof tag);
	return raw + HDR;
}

uint8_t *cx_pool_get(size_t *size)
{
	uint8_t *b = NULL;
	int grow = 0;
	pthread_mutex_lock(&mu);
	if (nfree > 0)
		b = free_list[--nfree];
	else if (allocated < capacity)
		allocated++, grow = 1;
	if (b || grow)
		outstanding++;
	pthread_mutex_unlock(&mu);
	if (grow && !(b = alloc_buffer(TAG_POOL))) {
		pthread_mutex_lock(&mu);
		allocated--, outstanding--;
		pthread_mutex_unlock(&mu);
	}
	if (!b && !refuse) {
		b = alloc_buffer(TAG_EXTRA);
		if (b)
			atomic_fetch_add(&extras, 1);
	}
	if (!b) {
		cx_count_drop(CX_DROP_POOL_EXHAUSTED, 1);
		*size = 0;
		return NULL;
	}
	*size = bufsize;
	return b;
}

void cx_pool_put(uint8_t *buf)
{
	if (!buf)
		return;
	uint32_t tag;
	memcpy(&tag, buf - HDR, sizeof tag);
	if (tag == TAG_EXTRA) {
		free(buf - HDR);
		return;
	}
	pthread_mutex_lock(&mu);
	free_list[nfree++] = buf;
	outstanding--;
	pthread_mutex_unlock(&mu);
}

int cx_pool_outstanding(void)
{
	pthread_mutex_lock(&mu);
	int n = outstanding;
	pthread_mutex_unlock(&mu);
	return n;
}

unsigned long cx_pool_extras(void)
{
	return atomic_load(&extras);
}
