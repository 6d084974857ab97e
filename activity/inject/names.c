/* names.c: the process-wide kernel-name table. Ids are stable for the process
 * lifetime (1..CX_MAX_NAME_ID) and bounded in count and bytes; the sender
 * sends each id once per connection. */
#include <stdlib.h>
#include <string.h>

#include "inject.h"

#define SLOTS (2u * (CX_MAX_NAME_ID + 1)) /* open addressing, load <= 0.5 */

struct entry {
	char *s;
	uint16_t len;
	uint32_t hash;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *slots;      /* 0 = empty, else an id */
static struct entry *entries; /* index = id */
static uint32_t next_id = 1;
static size_t total_bytes;

static uint32_t fnv1a(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

uint32_t cx_names_intern(const char *s)
{
	size_t n = strnlen(s, CX_MAX_STRING); /* longer names are truncated */
	uint32_t h = fnv1a(s, n), id = 0;
	pthread_mutex_lock(&mu);
	if (!slots) {
		slots = calloc(SLOTS, sizeof *slots);
		entries = calloc(CX_MAX_NAME_ID + 1, sizeof *entries);
		if (!slots || !entries) {
			free(slots), free(entries);
			slots = NULL, entries = NULL;
			goto out;
		}
	}
	for (uint32_t i = h & (SLOTS - 1);; i = (i + 1) & (SLOTS - 1)) {
		uint32_t cand = slots[i];
		if (!cand) {
			if (next_id > CX_MAX_NAME_ID || total_bytes + n > CX_MAX_STRING_BYTES)
				goto out;
			char *copy = malloc(n + 1);
			if (!copy)
				goto out;
			memcpy(copy, s, n);
			copy[n] = 0;
			id = next_id++;
			entries[id] = (struct entry){copy, (uint16_t)n, h};
			total_bytes += n;
			slots[i] = id;
			goto out;
		}
		struct entry *e = &entries[cand];
		if (e->hash == h && e->len == n && !memcmp(e->s, s, n)) {
			id = cand;
			goto out;
		}
	}
out:
	pthread_mutex_unlock(&mu);
	return id;
}

const char *cx_names_get(uint32_t id, uint16_t *len)
{
	pthread_mutex_lock(&mu);
	const char *s = NULL;
	if (entries && id > 0 && id < next_id) {
		s = entries[id].s;
		*len = entries[id].len;
	}
	pthread_mutex_unlock(&mu);
	return s;
}
