/* inject.c: InitializeInjection, the CUPTI buffer callbacks, fork and exit.
 * Loaded by the CUDA driver through CUDA_INJECTION64_PATH. It returns 1 in
 * every case (tracing, stepping aside, or failing to set up), so the
 * application always runs; why it is not tracing is logged once. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"

struct cx_state cx_g;
static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static atomic_int finished;

uint64_t cx_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cx_count_drop(int reason, uint64_t n)
{
	if (n)
		atomic_fetch_add(&cx_g.drops[reason], n);
}

static const char *result_string(CUptiResult r)
{
	const char *s = NULL;
	if (cx_g.cupti.get_result_string && cx_g.cupti.get_result_string(r, &s) == CX_CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

/* Runs in a forked child: the child never calls CUPTI (its worker thread did
 * not survive the fork) and never sends; it may hold no lock taken here. */
static void after_fork_child(void)
{
	atomic_store(&cx_g.child, 1);
}

static void request_buffer(uint8_t **buf, size_t *size, size_t *max_records)
{
	*max_records = 0;
	if (atomic_load(&cx_g.child)) {
		/* The pool's lock may be held by a thread that did not survive the fork. */
		*size = 64 << 10;
		*buf = cx_g.cupti_version >= CX_CUPTI_FIRST_SAFE_NULL_BUFFER ? NULL : aligned_alloc(8, *size);
		if (!*buf)
			*size = 0;
		return;
	}
	*buf = cx_pool_get(size);
}

static void buffer_completed(void *ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	(void)ctx, (void)stream, (void)size;
	if (atomic_load(&cx_g.child))
		return; /* leaked on purpose: see after_fork_child */
	if (buf && valid)
		cx_records_consume(&cx_g.cupti, buf, valid);
	cx_pool_put(buf);
}

uint64_t cx_cupti_time(void)
{
	uint64_t ts = 0;
	if (cx_g.cupti.get_timestamp(&ts) != CX_CUPTI_SUCCESS)
		return 0;
	return ts;
}

int cx_enable_kinds(int enable, uint64_t *ts)
{
	const struct cx_config *c = &cx_g.cfg;
	int kinds[4], n = 0;
	if (c->kernel)
		kinds[n++] = CX_KIND_CONCURRENT_KERNEL;
	if (c->memcpy)
		kinds[n++] = CX_KIND_MEMCPY;
	if (c->memset)
		kinds[n++] = CX_KIND_MEMSET;
	if (c->ptop)
		kinds[n++] = CX_KIND_MEMCPY2;
	if (!enable && ts)
		*ts = cx_cupti_time(); /* the span ends before the first kind goes off */
	for (int i = 0; i < n; i++) {
		CUptiResult r = enable ? cx_g.cupti.enable(kinds[i]) : cx_g.cupti.disable(kinds[i]);
		if (r != CX_CUPTI_SUCCESS) {
			if (enable) /* undo: all or nothing */
				for (int j = 0; j < i; j++)
					cx_g.cupti.disable(kinds[j]);
			return r;
		}
	}
	if (enable && ts)
		*ts = cx_cupti_time(); /* the span starts once every kind is on */
	atomic_store(&cx_g.tracing, enable);
	return 0;
}

static void *open_cupti(void)
{
	static const char *const sonames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
	const struct cx_config *c = &cx_g.cfg;
	if (c->cupti_library[0])
		return dlopen(c->cupti_library, RTLD_NOW | RTLD_LOCAL);
	/* Prefer a libcupti the application already loaded (PyTorch ships one). */
	for (size_t i = 0; i < sizeof sonames / sizeof *sonames; i++) {
		void *h = dlopen(sonames[i], RTLD_NOW | RTLD_NOLOAD);
		if (h)
			return h;
	}
	for (size_t i = 0; i < sizeof sonames / sizeof *sonames; i++) {
		void *h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
		if (h)
			return h;
	}
	return NULL;
}

static int resolve_cupti(void *h)
{
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{"cuptiGetVersion", (void **)&cx_g.cupti.get_version},
		{"cuptiActivityRegisterCallbacks", (void **)&cx_g.cupti.register_callbacks},
		{"cuptiActivityEnable", (void **)&cx_g.cupti.enable},
		{"cuptiActivityDisable", (void **)&cx_g.cupti.disable},
		{"cuptiActivityGetNextRecord", (void **)&cx_g.cupti.get_next_record},
		{"cuptiActivityGetNumDroppedRecords", (void **)&cx_g.cupti.get_num_dropped},
		{"cuptiActivityFlushAll", (void **)&cx_g.cupti.flush_all},
		{"cuptiGetResultString", (void **)&cx_g.cupti.get_result_string},
		{"cuptiGetTimestamp", (void **)&cx_g.cupti.get_timestamp},
	};
	for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot) {
			cx_log(1, "not tracing: libcupti lacks %s", syms[i].name);
			return -1;
		}
	}
	return 0;
}

static void log_totals(void)
{
	uint64_t d[CX_NUM_DROPS], total = 0, pending, merged, dropped;
	for (int i = 0; i < CX_NUM_DROPS; i++)
		total += d[i] = atomic_load(&cx_g.drops[i]);
	cx_coverage_stats(&pending, &merged, &dropped);
	cx_log(total || pending || dropped ? 1 : 2,
	       "exit: %llu records sent of %llu queued; dropped: pool_exhausted=%llu queue_full=%llu cupti=%llu "
	       "unknown=%llu names=%llu; extra buffers=%lu; coverage spans unsent=%llu merged=%llu dropped=%llu; quiet flushes=%llu; "
	       "launch watches=%llu launch frames=%llu",
	       (unsigned long long)cx_sender_sent(), (unsigned long long)atomic_load(&cx_g.records_queued), (unsigned long long)d[CX_DROP_POOL_EXHAUSTED],
	       (unsigned long long)d[CX_DROP_QUEUE_FULL], (unsigned long long)d[CX_DROP_CUPTI],
	       (unsigned long long)d[CX_DROP_UNKNOWN_RECORD], (unsigned long long)d[CX_DROP_NAME_TABLE_FULL],
	       cx_pool_extras(), (unsigned long long)pending, (unsigned long long)merged, (unsigned long long)dropped,
	       (unsigned long long)atomic_load(&cx_g.quiet_flushes), (unsigned long long)atomic_load(&cx_g.launch_watches),
	       (unsigned long long)atomic_load(&cx_g.launch_frames));
}

/* CuptiExporterFinish flushes CUPTI, sends the last records and goodbye, and
 * waits at most CUPTI_EXPORTER_EXIT_TIMEOUT_MS. It runs from atexit, only in
 * the initialising process, once; tests call it directly. */
__attribute__((visibility("default"))) void CuptiExporterFinish(void)
{
	if (getpid() != cx_g.pid || atomic_load(&cx_g.child) || atomic_exchange(&finished, 1))
		return;
	if (atomic_load(&cx_g.tracing)) {
		uint64_t end = cx_cupti_time(); /* the last span ends here, behind the records flushed now */
		cx_g.cupti.flush_all(1);        /* FLUSH_FORCED: deliver incomplete buffers too */
		atomic_store(&cx_g.trace_end, end ? end : 1);
	}
	cx_sender_finish(cx_g.cfg.exit_timeout_ms);
	log_totals();
}

static int step_aside(const char *what, CUptiResult r)
{
	if (r == CX_CUPTI_MULTIPLE_SUBSCRIBERS)
		cx_log(1, "not tracing: another CUPTI client holds this process (%s: %d %s); stepping aside", what, r,
		       result_string(r));
	else
		cx_log(1, "not tracing: %s failed: %d %s", what, r, result_string(r));
	return 1;
}

static int initialize(void)
{
	cx_config_load(&cx_g.cfg);
	if (cx_g.cfg.disabled) {
		cx_log(2, "not tracing: CUPTI_EXPORTER_DISABLE=1");
		return 1;
	}
	const char *tool = cx_config_other_tool(&cx_g.cfg);
	if (tool) {
		cx_log(1, "not tracing: %s is set, so another CUPTI tool owns this process; stepping aside", tool);
		return 1;
	}
	cx_g.pid = getpid();
	pthread_atfork(NULL, NULL, after_fork_child);
	void *h = open_cupti();
	if (!h) {
		cx_log(1, "not tracing: loading libcupti: %s (set CUPTI_EXPORTER_CUPTI_LIBRARY)", dlerror());
		return 1;
	}
	if (resolve_cupti(h))
		return 1;
	CUptiResult r = cx_g.cupti.get_version(&cx_g.cupti_version);
	if (r != CX_CUPTI_SUCCESS)
		return step_aside("cuptiGetVersion", r);
	if (!cx_records_version_known(cx_g.cupti_version)) {
		cx_log(1, "not tracing: CUPTI API version %u is not one this library reads (12.8-12.9 U1, 13.0-13.4)",
		       cx_g.cupti_version);
		cx_count_drop(CX_DROP_VERSION_REFUSED, 1);
		cx_sender_start(1); /* tell the exporter, then leave */
		return 1;
	}
	if (cx_pool_init(cx_g.cfg.buffer_count, cx_g.cfg.buffer_size,
			 cx_g.cupti_version >= CX_CUPTI_FIRST_SAFE_NULL_BUFFER) ||
	    cx_queue_init(cx_g.cfg.queue_records)) {
		cx_log(1, "not tracing: out of memory");
		return 1;
	}
	r = cx_g.cupti.register_callbacks(request_buffer, buffer_completed);
	if (r != CX_CUPTI_SUCCESS)
		return step_aside("cuptiActivityRegisterCallbacks", r);
	r = cx_enable_kinds(1, &cx_g.trace_start);
	if (r != CX_CUPTI_SUCCESS)
		return step_aside("cuptiActivityEnable", r);
	if (cx_sender_start(0)) {
		cx_enable_kinds(0, NULL);
		cx_log(1, "not tracing: starting the sender thread failed");
		return 1;
	}
	atexit(CuptiExporterFinish);
	cx_log(2, "tracing (CUPTI %u) to %s", cx_g.cupti_version, cx_g.cfg.socket_path);
	return 1;
}

__attribute__((visibility("default"))) int InitializeInjection(void)
{
	pthread_mutex_lock(&init_mu);
	if (!initialized) {
		initialized = 1;
		initialize();
	}
	pthread_mutex_unlock(&init_mu);
	return 1;
}
