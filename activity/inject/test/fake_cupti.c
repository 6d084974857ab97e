/* A fake libcupti for the activity API: it records the registered callbacks,
 * synthesises records at the documented offsets (REFERENCE.md §3.4), walks
 * them like cuptiActivityGetNextRecord, and notes any call made from a
 * process other than the first caller (a forked child) in
 * $FAKE_CUPTI_VIOLATIONS. It also stands in for the few libcuda calls. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_cupti.h"

typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*complete_fn)(void *, uint32_t, uint8_t *, size_t, size_t);

static request_fn req;
static complete_fn done;
static atomic_int enabled[64], enables, disables, flushes, forced;
static atomic_size_t dropped;
static atomic_int owner;
#define MAX_WINDOWS 4096
static pthread_mutex_t win_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t win[MAX_WINDOWS][2];
static int nwin;
static const char *names[5] = {"kernel_0", "kernel_1", "kernel_2", "kernel_3", "kernel_4"};

static void check_pid(const char *fn)
{
	int me = getpid(), expected = 0;
	if (atomic_compare_exchange_strong(&owner, &expected, me) || expected == me)
		return;
	const char *path = getenv("FAKE_CUPTI_VIOLATIONS");
	FILE *f = path ? fopen(path, "a") : NULL;
	if (f) {
		fprintf(f, "%s called from pid %d (owner %d)\n", fn, me, expected);
		fclose(f);
	}
}

static int env_int(const char *name, int def)
{
	const char *s = getenv(name);
	return s ? atoi(s) : def;
}

int cuptiGetVersion(uint32_t *v)
{
	check_pid(__func__);
	*v = (uint32_t)env_int("FAKE_CUPTI_VERSION", 130001);
	return 0;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Kernel windows: CUPTI's clock on bare-metal Linux is the Unix epoch in ns. */
static void note_window(int kind, int on)
{
	if (kind != 10)
		return;
	pthread_mutex_lock(&win_mu);
	if (on && !atomic_load(&enabled[10]) && nwin < MAX_WINDOWS)
		win[nwin][0] = realtime_ns(), win[nwin][1] = 0, nwin++;
	else if (!on && atomic_load(&enabled[10]) && nwin > 0)
		win[nwin - 1][1] = realtime_ns();
	pthread_mutex_unlock(&win_mu);
}

int cuptiGetTimestamp(uint64_t *ts)
{
	check_pid(__func__);
	*ts = realtime_ns();
	return 0;
}

int cuptiGetResultString(int r, const char **s)
{
	*s = r == 39 ? "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" : "CUPTI_ERROR_FAKE";
	return 0;
}

int cuptiActivityRegisterCallbacks(request_fn r, complete_fn c)
{
	check_pid(__func__);
	int res = env_int("FAKE_CUPTI_REGISTER_RESULT", 0);
	if (res)
		return res;
	if (!r || !c)
		return 1;
	req = r, done = c;
	return 0;
}

int cuptiActivityEnable(int kind)
{
	check_pid(__func__);
	atomic_fetch_add(&enables, 1);
	int res = env_int("FAKE_CUPTI_ENABLE_RESULT", 0);
	/* FAKE_CUPTI_ENABLE_FAIL_KIND: only that kind fails (tests the undo) */
	if (res && (env_int("FAKE_CUPTI_ENABLE_FAIL_KIND", -1) < 0 || env_int("FAKE_CUPTI_ENABLE_FAIL_KIND", -1) == kind))
		return res;
	note_window(kind, 1);
	if (kind >= 0 && kind < 64)
		atomic_store(&enabled[kind], 1);
	return 0;
}

int cuptiActivityDisable(int kind)
{
	check_pid(__func__);
	atomic_fetch_add(&disables, 1);
	note_window(kind, 0);
	if (kind >= 0 && kind < 64)
		atomic_store(&enabled[kind], 0);
	return 0;
}

static size_t record_size(uint32_t kind)
{
	switch (kind) {
	case 10:
	case 3:
		return FAKE_KERNEL_SIZE;
	case 1:
		return FAKE_MEMCPY_SIZE;
	case 2:
		return FAKE_MEMSET_SIZE;
	case 22:
		return FAKE_PTOP_SIZE;
	case FAKE_OTHER_KIND:
		return FAKE_OTHER_SIZE;
	case 4:
	case 5:
		return FAKE_API_SIZE;
	}
	return 0;
}

int cuptiActivityGetNextRecord(uint8_t *buf, size_t valid, void **rec)
{
	check_pid(__func__);
	size_t off = 0;
	if (*rec) {
		uint32_t kind;
		memcpy(&kind, *rec, 4);
		off = (size_t)((uint8_t *)*rec - buf) + record_size(kind);
	}
	if (off + 8 > valid)
		return 12; /* MAX_LIMIT_REACHED */
	uint32_t kind;
	memcpy(&kind, buf + off, 4);
	size_t n = record_size(kind);
	if (!n || off + n > valid)
		return 21; /* INVALID_KIND */
	*rec = buf + off;
	return 0;
}

int cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream, size_t *n)
{
	(void)ctx, (void)stream;
	check_pid(__func__);
	*n = atomic_exchange(&dropped, 0);
	return 0;
}

int cuptiActivityFlushAll(uint32_t flag)
{
	check_pid(__func__);
	atomic_fetch_add(flag ? &forced : &flushes, 1);
	return 0;
}

/* libcuda stand-ins (the library reaches them with CUPTI_EXPORTER_CUDA_LIBRARY). */
int cuInit(unsigned flags) { return flags ? 1 : 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int i) { *d = i; return 0; }
int cuDeviceGetUuid(unsigned char *u, int dev)
{
	for (int i = 0; i < 16; i++)
		u[i] = (unsigned char)(dev * 16 + i);
	return 0;
}

/* ---- controls ---- */
static void put32(uint8_t *p, size_t off, uint32_t v) { memcpy(p + off, &v, 4); }
static void put64(uint8_t *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }

static int f_request(uint8_t **buf, size_t *size)
{
	size_t max = 0;
	*buf = NULL, *size = 0;
	req(buf, size, &max);
	return *buf != NULL;
}

static void f_complete(uint8_t *buf, size_t valid) { done(NULL, 0, buf, 0, valid); }

static size_t f_fill(uint8_t *buf, size_t size, uint64_t first, int n)
{
	size_t off = 0;
	for (uint64_t g = first; g < first + (uint64_t)n; g++) {
		static const uint32_t kinds[3] = {10, 1, 2};
		uint32_t kind = fake_ptop(g) ? 22 : kinds[fake_kind(g)];
		size_t rs = record_size(kind);
		if (off + rs > size)
			break;
		uint8_t *p = buf + off;
		memset(p, 0xAB, rs); /* garbage in the fields the library must not read */
		put32(p, 0, kind);
		put64(p, 16, fake_start(g));
		put64(p, 24, fake_start(g) + fake_duration(g));
		if (kind == 10) {
			put32(p, 40, fake_device(g));
			put32(p, 48, fake_stream(g));
			const char *name = names[g % 5];
			memcpy(p + 104, &name, sizeof name);
		} else {
			put64(p, 8, fake_bytes(g));
			put32(p, 32, fake_device(g));
			put32(p, 40, fake_stream(g));
			if (kind == 22) { /* PtoP4: copyKind 10, device/src/dst ids at 32/44/52 */
				p[4] = 10, p[5] = 3, p[6] = 3;
				put32(p, 32, fake_src_device(g));
				put32(p, 44, fake_src_device(g));
				put32(p, 52, fake_device(g));
			} else if (kind == 1) {
				p[4] = (uint8_t)fake_copy_kind(g), p[5] = 1, p[6] = 3;
			} else {
				uint16_t mk = 3;
				memcpy(p + 50, &mk, 2);
			}
		}
		off += rs;
	}
	return off;
}

static size_t f_fill_other(uint8_t *buf, size_t size)
{
	if (size < FAKE_OTHER_SIZE)
		return 0;
	memset(buf, 0, FAKE_OTHER_SIZE);
	put32(buf, 0, FAKE_OTHER_KIND);
	return FAKE_OTHER_SIZE;
}

static size_t f_fill_api(uint8_t *buf, size_t size, uint32_t kind, uint32_t cbid, uint64_t start)
{
	if (size < FAKE_API_SIZE)
		return 0;
	memset(buf, 0xAB, FAKE_API_SIZE);
	put32(buf, 0, kind);
	put32(buf, 4, cbid);
	put64(buf, 8, start);
	put64(buf, 16, start + 3000);
	return FAKE_API_SIZE;
}

static int f_registered(void) { return req != NULL; }
static int f_enabled(int kind) { return kind >= 0 && kind < 64 && atomic_load(&enabled[kind]); }
static int f_enable_calls(void) { return atomic_load(&enables); }
static int f_disable_calls(void) { return atomic_load(&disables); }
static int f_flush_calls(int f) { return atomic_load(f ? &forced : &flushes); }
static void f_set_dropped(size_t n) { atomic_store(&dropped, n); }

static int f_windows(uint64_t (*w)[2], int max)
{
	pthread_mutex_lock(&win_mu);
	int n = nwin < max ? nwin : max;
	memcpy(w, win, (size_t)n * sizeof *w);
	pthread_mutex_unlock(&win_mu);
	return n;
}

struct fake_api fake_cupti_api = {
	f_request, f_complete, f_fill, f_fill_other, f_registered, f_enabled,
	f_enable_calls, f_disable_calls, f_flush_calls, f_set_dropped, f_windows, realtime_ns,
	f_fill_api,
};
