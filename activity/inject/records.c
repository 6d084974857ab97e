/* records.c: reads CUPTI activity records by offset (REFERENCE.md §3.4-3.5)
 * and turns them into wire records. Only fields of the stable prefix are read,
 * so one reader serves every version we know; unknown versions are refused. */
#include <string.h>

#include "inject.h"

/* API versions whose kernel/memcpy/memset/PtoP prefixes REFERENCE §3.5 vouches for:
 * 26 (12.8), 27 (12.9), 28 (12.9 U1), and 13.0 .. 13.4 (130000 .. 130499). */
int cx_records_version_known(uint32_t v)
{
	return (v >= 26 && v <= 28) || (v >= 130000 && v < 130500);
}

static inline uint32_t rd32(const uint8_t *p, size_t off)
{
	uint32_t v;
	memcpy(&v, p + off, sizeof v);
	return v;
}

static inline uint64_t rd64(const uint8_t *p, size_t off)
{
	uint64_t v;
	memcpy(&v, p + off, sizeof v);
	return v;
}

static inline uint8_t small(uint32_t v)
{
	return v > 255 ? 255 : (uint8_t)v;
}

static void times(struct cx_record *r, uint64_t start, uint64_t end)
{
	r->start = start;
	r->duration = end > start ? end - start : 0;
}

/* Returns 1 when rec became a wire record, 0 when skipped. */
static int convert(const uint8_t *p, struct cx_record *r)
{
	memset(r, 0, sizeof *r);
	switch (rd32(p, 0)) {
	case CX_KIND_CONCURRENT_KERNEL:
	case CX_KIND_KERNEL: { /* Kernel4 .. Kernel13 prefix */
		r->kind = CX_WIRE_KERNEL;
		times(r, rd64(p, 16), rd64(p, 24));
		r->device = rd32(p, 40);
		r->stream = rd32(p, 48);
		const char *name;
		memcpy(&name, p + 104, sizeof name);
		if (name && *name) {
			r->name_id = cx_names_intern(name);
			if (!r->name_id)
				cx_count_drop(CX_DROP_NAME_TABLE_FULL, 1);
		}
		return 1;
	}
	case CX_KIND_MEMCPY: /* Memcpy .. Memcpy6 prefix */
		r->kind = CX_WIRE_MEMCPY;
		r->copy_kind = p[4], r->src_kind = p[5], r->dst_kind = p[6];
		r->bytes = rd64(p, 8);
		times(r, rd64(p, 16), rd64(p, 24));
		r->device = rd32(p, 32);
		r->stream = rd32(p, 40);
		return 1;
	case CX_KIND_MEMCPY2: /* MemcpyPtoP3 (11.1) .. MemcpyPtoP4 prefix */
		r->kind = CX_WIRE_MEMCPY;
		r->copy_kind = CX_COPY_PTOP, r->src_kind = p[5], r->dst_kind = p[6];
		r->bytes = rd64(p, 8);
		times(r, rd64(p, 16), rd64(p, 24));
		r->device = rd32(p, 52);     /* dstDeviceId: the GPU the copy is counted on */
		r->src_device = rd32(p, 44); /* srcDeviceId */
		r->stream = rd32(p, 40);
		return 1;
	case CX_KIND_MEMSET: { /* Memset .. Memset4 prefix */
		uint16_t mk;
		memcpy(&mk, p + 50, sizeof mk);
		r->kind = CX_WIRE_MEMSET;
		r->memory_kind = small(mk);
		r->bytes = rd64(p, 8);
		times(r, rd64(p, 16), rd64(p, 24));
		r->device = rd32(p, 32);
		r->stream = rd32(p, 40);
		return 1;
	}
	}
	return 0;
}

static void push(struct cx_record *batch, size_t n)
{
	atomic_fetch_add(&cx_g.records_seen, n);
	size_t ok = cx_queue_push(batch, n);
	atomic_fetch_add(&cx_g.records_queued, ok);
	if (ok < n)
		cx_count_drop(CX_DROP_QUEUE_FULL, n - ok);
}

void cx_records_consume(const struct cx_cupti *cupti, uint8_t *buf, size_t valid)
{
	struct cx_record batch[256];
	size_t n = 0;
	void *rec = NULL;
	CUptiResult res;
	while ((res = cupti->get_next_record(buf, valid, &rec)) == CX_CUPTI_SUCCESS) {
		uint32_t kind = rd32(rec, 0);
		if (kind == CX_KIND_DRIVER || kind == CX_KIND_RUNTIME) { /* the launch watch: not activity */
			cx_launch_record(rec);
			continue;
		}
		if (!convert(rec, &batch[n])) {
			cx_count_drop(CX_DROP_UNKNOWN_RECORD, 1);
			continue;
		}
		if (++n == sizeof batch / sizeof batch[0]) {
			push(batch, n);
			n = 0;
		}
	}
	if (n)
		push(batch, n);
	if (res != CX_CUPTI_MAX_LIMIT_REACHED)
		cx_log(2, "cuptiActivityGetNextRecord stopped with %d (incomplete record)", res);
	size_t dropped = 0;
	if (cupti->get_num_dropped(NULL, 0, &dropped) == CX_CUPTI_SUCCESS && dropped)
		cx_count_drop(CX_DROP_CUPTI, dropped);
}
