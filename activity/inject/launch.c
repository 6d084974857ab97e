/* launch.c: the launch watch. While the process is quiet the sender enables CUPTI's
 * driver and runtime API records; the first call that submits GPU work (launch_cbids.h)
 * becomes a launch frame. An exporter that released an idle GPU's PM session takes it back
 * on it while the GPU is still waking: a GPU woken from idle finished its first kernel
 * 66-88 ms after the launch on an H200, and its kernel record came later still. The API
 * records are on only while quiet, so a busy process pays nothing for them. */
#include <string.h>

#include "inject.h"
#include "launch_cbids.h"

#define CBID(name, value) value,
static const uint32_t driver_work[] = {CX_DRIVER_WORK_CBIDS(CBID)};
static const uint32_t runtime_work[] = {CX_RUNTIME_WORK_CBIDS(CBID)};
#undef CBID

static _Atomic uint64_t seen_ts;   /* start of the first work call since the last take; 0: none */
static _Atomic uint64_t seen_what; /* its kind << 32 | cbid */
static atomic_int watching;        /* API kinds enabled (set by the sender thread only) */

static int listed(const uint32_t *ids, size_t n, uint32_t cbid)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == cbid)
			return 1;
	return 0;
}

static int is_work(uint32_t kind, uint32_t cbid)
{
	if (kind == CX_KIND_DRIVER)
		return listed(driver_work, sizeof driver_work / sizeof driver_work[0], cbid);
	if (kind == CX_KIND_RUNTIME)
		return listed(runtime_work, sizeof runtime_work / sizeof runtime_work[0], cbid);
	return 0;
}

/* CUpti_ActivityAPI: kind at 0, cbid at 4, start at 8 (stable since CUPTI 4). */
void cx_launch_record(const uint8_t *rec)
{
	uint32_t kind, cbid;
	uint64_t start;
	memcpy(&kind, rec, 4);
	memcpy(&cbid, rec + 4, 4);
	memcpy(&start, rec + 8, 8);
	/* API records still buffered after the watch went off (the launch was seen) say nothing new */
	if (!atomic_load(&watching) || !is_work(kind, cbid) || !start)
		return;
	if (atomic_load(&seen_ts))
		return; /* one launch per take */
	/* seen_what is set before seen_ts, and the taker reads it after: a frame never carries
	 * the kind 0 of an unset call (records may be consumed on CUPTI's thread and the sender's) */
	atomic_store(&seen_what, (uint64_t)kind << 32 | cbid);
	uint64_t none = 0;
	if (atomic_compare_exchange_strong(&seen_ts, &none, start))
		cx_queue_wake(); /* the sender sends it now, not at its next wait's end */
}

int cx_launch_take(uint64_t *ts, uint32_t *kind, uint32_t *cbid)
{
	uint64_t t = atomic_exchange(&seen_ts, 0);
	if (!t)
		return 0;
	uint64_t what = atomic_load(&seen_what);
	*ts = t, *kind = (uint32_t)(what >> 32), *cbid = (uint32_t)what;
	return 1;
}

void cx_launch_watch(int on)
{
	if (on == atomic_load(&watching))
		return;
	const struct cx_cupti *c = &cx_g.cupti;
	if (on) {
		if (c->enable(CX_KIND_DRIVER) != CX_CUPTI_SUCCESS)
			return;
		if (c->enable(CX_KIND_RUNTIME) != CX_CUPTI_SUCCESS) {
			c->disable(CX_KIND_DRIVER);
			return;
		}
		atomic_fetch_add(&cx_g.launch_watches, 1);
	} else {
		c->disable(CX_KIND_RUNTIME);
		c->disable(CX_KIND_DRIVER);
	}
	atomic_store(&watching, on);
}
