/* coverage.c: the spans of time this process traced (wire frame "coverage",
 * docs/wire-format.md). Owned by the sender thread: no lock. A span opens when
 * the activity kinds are enabled and closes when they are disabled, and the
 * open span is cut at every periodic flush. A closed span waits until the
 * records queued before it closed have gone into the frame buffer, so the
 * exporter reads the records before the span that covers them. Spans wait in
 * a bounded list while the exporter is absent: when it is full, spans that
 * touch are merged, else the oldest is dropped (its time then reads as
 * untraced, never as idle) and counted. */
#include <string.h>

#include "inject.h"

#define MAX_SPANS 256

struct span {
	uint64_t start, end, seq; /* seq: records pushed to the queue when it closed */
	int lossy;
};

static struct span spans[MAX_SPANS]; /* spans[0] is the oldest */
static int nspans, inflight;         /* inflight: spans[0..inflight) are in the frame buffer */
static int open_;
static uint64_t open_start, open_drops;
static uint64_t dropped_spans, merged_spans;
static _Atomic uint64_t pub_pending, pub_merged, pub_dropped; /* for the exit log line (another thread) */

static void publish(void)
{
	atomic_store(&pub_pending, (uint64_t)nspans);
	atomic_store(&pub_merged, merged_spans);
	atomic_store(&pub_dropped, dropped_spans);
}

/* The drop counters whose records are lost (an unknown or unnamed record is not). */
uint64_t cx_coverage_loss_count(void)
{
	return atomic_load(&cx_g.drops[CX_DROP_POOL_EXHAUSTED]) + atomic_load(&cx_g.drops[CX_DROP_QUEUE_FULL]) +
	       atomic_load(&cx_g.drops[CX_DROP_CUPTI]);
}

void cx_coverage_open(uint64_t ts)
{
	open_ = 1;
	open_start = ts;
	open_drops = cx_coverage_loss_count();
}

int cx_coverage_is_open(void)
{
	return open_;
}

static void make_room(void)
{
	if (nspans < MAX_SPANS)
		return;
	for (int i = inflight; i + 1 < nspans; i++) {
		if (spans[i].end == spans[i + 1].start) { /* a flush cut: merging claims nothing new */
			spans[i].end = spans[i + 1].end;
			spans[i].seq = spans[i + 1].seq;
			spans[i].lossy |= spans[i + 1].lossy;
			memmove(&spans[i + 1], &spans[i + 2], (size_t)(nspans - i - 2) * sizeof *spans);
			nspans--, merged_spans++;
			return;
		}
	}
	int i = inflight < nspans ? inflight : 0;
	memmove(&spans[i], &spans[i + 1], (size_t)(nspans - i - 1) * sizeof *spans);
	nspans--, dropped_spans++;
	if (dropped_spans == 1)
		cx_log(1, "coverage: %d spans waiting for the exporter; dropping the oldest (their time reads as untraced)",
		       MAX_SPANS);
}

void cx_coverage_close(uint64_t ts, int reopen)
{
	if (!open_)
		return;
	uint64_t d = cx_coverage_loss_count();
	if (ts > open_start) {
		make_room();
		spans[nspans++] = (struct span){open_start, ts, cx_queue_pushed(), d != open_drops};
		publish();
	}
	open_ = 0;
	if (reopen) {
		open_ = 1;
		open_start = ts > open_start ? ts : open_start;
		open_drops = d;
	}
}

void cx_coverage_mark_lossy(void)
{
	for (int i = 0; i < nspans; i++)
		spans[i].lossy = 1;
	if (open_)
		open_drops = ~0ull; /* differs from any count: the open span closes lossy */
	inflight = 0;
}

int cx_coverage_ready(uint64_t consumed)
{
	return nspans > inflight && spans[inflight].seq <= consumed;
}

size_t cx_coverage_append(uint8_t *dst, uint64_t consumed)
{
	int first = inflight, n = 0;
	while (inflight < nspans && spans[inflight].seq <= consumed && n < CX_SPANS_PER_FRAME)
		inflight++, n++;
	if (!n)
		return 0;
	uint64_t s[CX_SPANS_PER_FRAME][2];
	int lossy[CX_SPANS_PER_FRAME];
	for (int i = 0; i < n; i++)
		s[i][0] = spans[first + i].start, s[i][1] = spans[first + i].end, lossy[i] = spans[first + i].lossy;
	return cx_wire_coverage(dst, s, lossy, (uint32_t)n);
}

void cx_coverage_sent(void)
{
	memmove(&spans[0], &spans[inflight], (size_t)(nspans - inflight) * sizeof *spans);
	nspans -= inflight;
	inflight = 0;
	publish();
}

size_t cx_coverage_append_all_lossy(uint8_t *dst)
{
	cx_coverage_mark_lossy();
	size_t len = 0;
	while (nspans > inflight) {
		size_t l = cx_coverage_append(dst + len, ~0ull);
		if (!l)
			break;
		len += l;
	}
	return len;
}

void cx_coverage_stats(uint64_t *pending, uint64_t *merged, uint64_t *dropped)
{
	*pending = atomic_load(&pub_pending), *merged = atomic_load(&pub_merged), *dropped = atomic_load(&pub_dropped);
}
