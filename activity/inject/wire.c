/* wire.c: encodes frames of docs/wire-format.md into caller buffers. */
#include <string.h>

#include "inject.h"

static uint8_t *put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); return p + 2; }
static uint8_t *put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); return p + 4; }
static uint8_t *put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); return p + 8; }

size_t cx_wire_header(uint8_t *dst, int type, uint32_t len)
{
	uint8_t *p = put32(dst, CX_WIRE_MAGIC);
	*p++ = CX_WIRE_VERSION;
	*p++ = (uint8_t)type;
	p = put16(p, 0);
	put32(p, len);
	return CX_HEADER_SIZE;
}

/* Appends a str field, truncated to CX_MAX_STRING and to the room left. */
static uint8_t *put_str(uint8_t *p, const uint8_t *end, const char *s)
{
	size_t n = strnlen(s, CX_MAX_STRING);
	if ((size_t)(end - p) < 2 + n)
		n = end - p >= 2 ? (size_t)(end - p) - 2 : 0;
	if (end - p < 2)
		return p;
	p = put16(p, (uint16_t)n);
	memcpy(p, s, n);
	return p + n;
}

size_t cx_wire_hello(uint8_t *dst, size_t cap, const struct cx_hello *h)
{
	uint8_t *p = dst + CX_HEADER_SIZE, *end = dst + cap;
	p = put32(p, h->pid);
	p = put64(p, h->start_time_ns);
	p = put32(p, h->cuda_version);
	p = put32(p, h->cupti_version);
	p = put_str(p, end, h->exe);
	p = put_str(p, end, h->cgroup);
	p = put_str(p, end, h->pod);
	p = put_str(p, end, h->namespace_);
	p = put_str(p, end, h->container);
	int n = h->ndevices > CX_MAX_DEVICES ? CX_MAX_DEVICES : h->ndevices;
	p = put16(p, (uint16_t)n);
	for (int i = 0; i < n; i++)
		p = put_str(p, end, h->uuids[i]);
	size_t len = (size_t)(p - dst) - CX_HEADER_SIZE;
	cx_wire_header(dst, CX_FRAME_HELLO, (uint32_t)len);
	return CX_HEADER_SIZE + len;
}

size_t cx_wire_drops(uint8_t *dst, int goodbye, uint64_t sent, const uint64_t *drops)
{
	uint8_t *p = dst + CX_HEADER_SIZE;
	if (goodbye)
		p = put64(p, sent);
	p = put16(p, CX_NUM_DROPS);
	p = put16(p, 0);
	for (int i = 0; i < CX_NUM_DROPS; i++)
		p = put64(p, drops[i]);
	size_t len = (size_t)(p - dst) - CX_HEADER_SIZE;
	cx_wire_header(dst, goodbye ? CX_FRAME_GOODBYE : CX_FRAME_DROPS, (uint32_t)len);
	return CX_HEADER_SIZE + len;
}

size_t cx_wire_records(uint8_t *dst, uint64_t drop_total, const struct cx_record *r, uint32_t n)
{
	uint8_t *p = dst + CX_HEADER_SIZE;
	p = put64(p, drop_total);
	p = put32(p, n);
	p = put16(p, (uint16_t)sizeof *r);
	p = put16(p, 0);
	memcpy(p, r, n * sizeof *r);
	uint32_t len = CX_RECORDS_HEADER + n * (uint32_t)sizeof *r;
	cx_wire_header(dst, CX_FRAME_RECORDS, len);
	return CX_HEADER_SIZE + len;
}

size_t cx_wire_strings_begin(uint8_t *dst)
{
	(void)dst;
	return CX_HEADER_SIZE + 4; /* header, count */
}

/* Returns the new length, or at unchanged when the entry would not fit. */
size_t cx_wire_strings_add(uint8_t *dst, size_t at, uint32_t id, const char *s, uint16_t len)
{
	if (at + 6 + len > CX_HEADER_SIZE + CX_MAX_PAYLOAD)
		return at;
	uint8_t *p = put32(dst + at, id);
	p = put16(p, len);
	memcpy(p, s, len);
	return at + 6 + len;
}

void cx_wire_strings_finish(uint8_t *dst, size_t len, uint32_t count)
{
	cx_wire_header(dst, CX_FRAME_STRINGS, (uint32_t)(len - CX_HEADER_SIZE));
	put32(dst + CX_HEADER_SIZE, count);
}

size_t cx_wire_coverage(uint8_t *dst, const uint64_t (*spans)[2], const int *lossy, uint32_t n)
{
	uint8_t *p = dst + CX_HEADER_SIZE;
	p = put32(p, n);
	p = put32(p, 0);
	for (uint32_t i = 0; i < n; i++) {
		p = put64(p, spans[i][0]);
		p = put64(p, spans[i][1]);
		p = put32(p, lossy[i] ? 1u : 0u);
		p = put32(p, 0);
	}
	uint32_t len = 8 + n * CX_SPAN_SIZE;
	cx_wire_header(dst, CX_FRAME_COVERAGE, len);
	return CX_HEADER_SIZE + len;
}

size_t cx_wire_launch(uint8_t *dst, uint64_t ts, uint32_t kind, uint32_t cbid)
{
	uint8_t *p = dst + cx_wire_header(dst, CX_FRAME_LAUNCH, CX_LAUNCH_PAYLOAD);
	p = put64(p, ts);
	p = put32(p, kind);
	put32(p, cbid);
	return CX_HEADER_SIZE + CX_LAUNCH_PAYLOAD;
}
