/*
 * fake_cupti.c: a deterministic fake libcupti.so.13 implementing the subset cupti-exporter uses,
 * for tests on machines without a GPU. It uses the project's own declarations (../cupti_decl.h)
 * and checks every structSize against the 13.0 STRUCT_SIZE values, so a binding that sends
 * sizeof instead (56 for DeviceSupported, 48 for DecodeData, 64 for GetMetricProperties) gets
 * CUPTI_ERROR_INVALID_PARAMETER.
 *
 * Behaviour (README.md beside this file is the contract):
 *  - version 130001 (fault version=N changes it); chip "GH100" (or chip=NAME) on every device;
 *    CUPTI_FAKE_DEVICES devices (default 2).
 *  - metrics: the catalog TSV at $CUPTI_FAKE_CATALOG (default FAKE_DEFAULT_CATALOG, set at build).
 *    A full name is base + one suffix of its type (see the suffix lists below).
 *  - passes: 19 if the set holds a metric of base sm__throughput, else ceil(n/8) for n metrics.
 *    SetConfig with a config needing more than one pass returns 27 NOT_SUPPORTED.
 *  - samples: sample k (0-based since Start) spans [t0 + k*iv, t0 + (k+1)*iv] where t0 is the
 *    cuptiGetTimestamp value at Start and iv the interval (ns; in SYSCLK mode cycles at a nominal
 *    1 GHz). A sample exists once its end has passed (or, with samples_per_decode=N, every decode
 *    during sampling yields exactly N). A decode writes at most the image's free slots; the
 *    records beyond a full image are lost (as on the H200), the session goes on. Evaluate gives metric j (position in the names passed)
 *    of sample k the value 10*(j+1) + (k % 10).
 *  - more than hardwareBufferSize/4096 undecoded samples overflow the hardware buffer.
 *  - CUPTI 13.2 single-pass sets: cuptiProfilerHostGetSinglePassSets and
 *    cuptiProfilerHostGetMetricsInSinglePassSet (two-phase) list two sets for GH100, TriageCompute
 *    and Throughput; they return 11 API_NOT_IMPLEMENTED below version 130200. HostInitialize
 *    takes the 13.2 STRUCT_SIZE 56 (pSinglePassMetricSetName) only from version 130200.
 *    Built with -DFAKE_NO_SINGLE_PASS_SETS the two symbols are absent (cuptitest's variant).
 *  - faults (comma list, $CUPTI_FAKE_FAULTS at load, or cuptiFakeSetFaults at run time):
 *      busy_setconfig            SetConfig and the availability fill call return 26 while set
 *      busy_once                 the next SetConfig returns 26, then the knob clears
 *      overflow_at=N             decode N of a session returns 8 with overflow=1, and so does every
 *                                later decode until Disable
 *      image_full                every decode with more than one sample waiting writes half of them
 *                                and stops with reason 1 (COUNTER_DATA_FULL); the rest are lost
 *  - after a decode that stops with COUNTER_DATA_FULL, re-initialising that image returns 999
 *    (UNKNOWN) until the session is disabled, as the real library did on an H200.
 *      insufficient_privileges   Enable returns 35
 *      first_sample_before_start sample 0 starts 0.4 s before Start (as real hardware does)
 *      samples_per_decode=N      deterministic count per decode while started
 *      skip_every=N              the hardware loses every Nth sample (k % N == N-1): a hole of one
 *                                interval in the time line, no error
 *      split_every=N             every Nth decode of a session stops inside its newest sample:
 *                                populated, not completed; decoded again into the same image it
 *                                completes, into a re-initialised or other image the rest of its
 *                                records make sample 0 there, reading 4.258 times its value (H100)
 *      eval_cost_us=N            EvaluateToGpuValues sleeps N us per sample (a slow host)
 *      late_every=N,late_ms=M    every Nth decode of a session first sleeps M ms (a decode that
 *                                came late: samples wait meanwhile, and may overflow the image)
 *      version=N                 cuptiGetVersion value
 *      unsupported=arch|vgpu|cc  DeviceSupported reports that aspect (arch: UNSUPPORTED,
 *                                vgpu: DISABLED, cc: UNSUPPORTED)
 *      nvperf_missing            HostInitialize returns 15 NOT_INITIALIZED
 *      chip=NAME[/NAME...]       device i is the i-th chip, the last repeating (default GH100); on Turing and GA100
 *                                SetConfig refuses the GPU_TIME trigger (27)
 *      catalogs=DIR              serve each chip from its capture in DIR (CHIP.tsv, CHIP.passes:
 *                                pmsample/capture.go), pass counts from the capture (README.md)
 *      needs_nvperf_target       PmSamplingEnable returns 15 NOT_INITIALIZED until a
 *                                libnvperf_target.so is loaded in the process (query
 *                                nvperf_target_loaded says whether one is)
 */
#define _GNU_SOURCE
#include "../cupti_decl.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef FAKE_DEFAULT_VERSION
#define FAKE_DEFAULT_VERSION 130001
#endif

#ifndef FAKE_DEFAULT_CATALOG
#define FAKE_DEFAULT_CATALOG "testdata/gh100_pm_sampling_base_metrics.tsv"
#endif

enum {
	OK = 0,
	E_PARAM = 1,
	E_DEVICE = 2,
	E_OPERATION = 7,
	E_NOT_IMPLEMENTED = 11,
	E_MEMORY = 8,
	E_NOT_INIT = 15,
	E_METRIC = 17,
	E_BUSY = 26,
	E_NOT_SUPPORTED = 27,
	E_PRIVILEGES = 35,
	E_SUBSCRIBERS = 39,
	E_CHIP = 46,
	E_UNKNOWN = 999
};

#define MAX_DEV 64
#define AVAIL_SIZE 9184
#define SAMPLE_HWBYTES 4096
#define FIRST_SAMPLE_EARLY_NS 400000000ull

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&mu)
#define UNLOCK() pthread_mutex_unlock(&mu)

/* ---- faults and counters --------------------------------------------------------------------- */

static char catalogs_dir[512]; /* the catalogs=DIR knob; empty: the default TSV for every chip */
static char device_chip[256];  /* the chip=NAME[/NAME...] knob (device i takes the i-th, the last repeats); empty: GH100 */

static struct {
	int busy_setconfig, busy_once, image_full, insufficient_privileges, first_sample_before_start;
	int nvperf_missing, needs_nvperf_target, unsupported_arch, unsupported_vgpu, unsupported_cc;
	unsigned overflow_at, samples_per_decode, skip_every, eval_cost_us, late_every, late_ms, split_every;
	uint32_t version;
} F;

static struct {
	unsigned long long init, deinit, hosts, sessions, enables, hosts_with_set, host_init_size, passes_unknown;
	unsigned long long sc_struct_size, sc_interval, sc_trigger, sc_append, sc_hwbuf;
	unsigned long long decode_tid, evaluate_tid; /* the threads (gettid) of the last decode and evaluation */
} Q;

static int set_faults_locked(const char *spec) {
	memset(&F, 0, sizeof F);
	F.version = FAKE_DEFAULT_VERSION;
	catalogs_dir[0] = device_chip[0] = 0;
	if (!spec)
		return 0;
	char *copy = strdup(spec), *save = NULL, *tok;
	int rc = 0;
	for (tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		char *eq = strchr(tok, '=');
		const char *val = eq ? eq + 1 : "";
		if (eq)
			*eq = 0;
		if (!strcmp(tok, "busy_setconfig")) F.busy_setconfig = 1;
		else if (!strcmp(tok, "busy_once")) F.busy_once = 1;
		else if (!strcmp(tok, "image_full")) F.image_full = 1;
		else if (!strcmp(tok, "insufficient_privileges")) F.insufficient_privileges = 1;
		else if (!strcmp(tok, "first_sample_before_start")) F.first_sample_before_start = 1;
		else if (!strcmp(tok, "nvperf_missing")) F.nvperf_missing = 1;
		else if (!strcmp(tok, "needs_nvperf_target")) F.needs_nvperf_target = 1;
		else if (!strcmp(tok, "overflow_at")) F.overflow_at = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "samples_per_decode")) F.samples_per_decode = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "skip_every")) F.skip_every = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "split_every")) F.split_every = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "eval_cost_us")) F.eval_cost_us = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "late_every")) F.late_every = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "late_ms")) F.late_ms = (unsigned)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "version")) F.version = (uint32_t)strtoul(val, NULL, 10);
		else if (!strcmp(tok, "chip")) snprintf(device_chip, sizeof device_chip, "%s", val);
		else if (!strcmp(tok, "catalogs")) snprintf(catalogs_dir, sizeof catalogs_dir, "%s", val);
		else if (!strcmp(tok, "unsupported") && !strcmp(val, "arch")) F.unsupported_arch = 1;
		else if (!strcmp(tok, "unsupported") && !strcmp(val, "vgpu")) F.unsupported_vgpu = 1;
		else if (!strcmp(tok, "unsupported") && !strcmp(val, "cc")) F.unsupported_cc = 1;
		else {
			fprintf(stderr, "fake libcupti: unknown fault %s\n", tok);
			rc = -1;
		}
	}
	free(copy);
	return rc;
}

/* cuptiFakeSetFaults replaces the fault set (NULL or "" clears it). Returns -1 on an unknown knob. */
int cuptiFakeSetFaults(const char *spec) {
	LOCK();
	int rc = set_faults_locked(spec);
	UNLOCK();
	return rc;
}

static int nvperf_target_loaded(void) {
	void *h = dlopen("libnvperf_target.so", RTLD_LAZY | RTLD_NOLOAD);
	if (h)
		dlclose(h);
	return h != NULL;
}

/* cuptiFakeQuery reads a counter: init, deinit, hosts (live host objects), sessions (enabled),
 * enables (successful Enable calls in all),
 * setconfig.struct_size, setconfig.interval, setconfig.trigger, setconfig.append, setconfig.hwbuf,
 * hosts.with_set (HostInitialize calls naming a single-pass set), host_init.struct_size (the last
 * successful HostInitialize), nvperf_target_loaded (1 when a libnvperf_target.so is loaded),
 * decode.tid and evaluate.tid (the Linux thread of the last DecodeData and EvaluateToGpuValues). */
int cuptiFakeQuery(const char *key, unsigned long long *out) {
	if (!strcmp(key, "nvperf_target_loaded")) {
		*out = (unsigned long long)nvperf_target_loaded();
		return 0;
	}
	static const struct {
		const char *k;
		unsigned long long *v;
	} keys[] = {{"init", &Q.init}, {"deinit", &Q.deinit}, {"hosts", &Q.hosts}, {"sessions", &Q.sessions}, {"enables", &Q.enables},
		    {"setconfig.struct_size", &Q.sc_struct_size}, {"setconfig.interval", &Q.sc_interval},
		    {"setconfig.trigger", &Q.sc_trigger}, {"setconfig.append", &Q.sc_append},
		    {"setconfig.hwbuf", &Q.sc_hwbuf}, {"hosts.with_set", &Q.hosts_with_set},
		    {"host_init.struct_size", &Q.host_init_size}, {"passes_unknown", &Q.passes_unknown},
		    {"decode.tid", &Q.decode_tid}, {"evaluate.tid", &Q.evaluate_tid}};
	int rc = -1;
	LOCK();
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strcmp(key, keys[i].k)) {
			*out = *keys[i].v;
			rc = 0;
		}
	UNLOCK();
	return rc;
}

static int ndev(void) {
	const char *s = getenv("CUPTI_FAKE_DEVICES");
	int n = s && *s ? atoi(s) : 2;
	return n > MAX_DEV ? MAX_DEV : n;
}

__attribute__((constructor)) static void fake_init(void) { set_faults_locked(getenv("CUPTI_FAKE_FAULTS")); }

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- catalog --------------------------------------------------------------------------------- */

typedef struct {
	int type;
	char *base, *hw, *dim, *desc;
	const char **subs; /* captured submetrics (leading dot), or NULL for the type's list */
	size_t nsubs;
} entry;

/* A captured pass count: the set (names), and its count or the CUptiResult that refused it. */
typedef struct {
	char **names;
	size_t n;
	size_t passes;
	int err;
} pass_fact;

/* A catalog: the default TSV (every chip, pass rule ceil(n/8)), or one chip's capture from the
 * catalogs=DIR knob (DIR/CHIP.tsv and DIR/CHIP.passes, pass counts from the capture). */
typedef struct {
	char *path;
	int captured;
	entry *e;
	size_t n;
	const char **by_type[3];
	size_t nby_type[3];
	pass_fact *facts;
	size_t nfacts;
} catalog;

#define MAX_CATALOGS 64
static catalog catalogs[MAX_CATALOGS];
static size_t ncatalogs;
static char **split_list(char *s, size_t *n) {
	size_t cap = 8;
	char **out = calloc(cap, sizeof *out), *save = NULL;
	*n = 0;
	for (char *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (*n == cap)
			out = realloc(out, (cap *= 2) * sizeof *out);
		out[(*n)++] = strdup(t);
	}
	return out;
}

static entry *find_base(catalog *c, const char *base) {
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->e[i].base, base))
			return &c->e[i];
	return NULL;
}

/* load_passes reads the name, passes, sublist and submetrics lines of a capture (format:
 * pmsample/capture.go): metrics and submetric lists are numbered from 0 in file order. */
static int load_passes(catalog *c, const char *path) {
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fake libcupti: pass counts %s: cannot open\n", path);
		return -1;
	}
	static char line[1 << 16];
	size_t cap = 64, ncap = 64, nnames = 0, lcap = 4, nlists = 0;
	char **names = calloc(ncap, sizeof *names);
	struct {
		char **subs;
		size_t n;
	} *lists = calloc(lcap, sizeof *lists);
	c->facts = calloc(cap, sizeof *c->facts);
	int rc = 0;
	while (rc == 0 && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\r\n")] = 0;
		char *save = NULL, *kind = strtok_r(line, "\t", &save), *a = strtok_r(NULL, "\t", &save);
		char *b = strtok_r(NULL, "\t", &save);
		if (!kind || !a || !b)
			continue;
		if (!strcmp(kind, "name")) {
			if ((size_t)atoi(a) != nnames) {
				rc = -1;
				break;
			}
			if (nnames == ncap)
				names = realloc(names, (ncap *= 2) * sizeof *names);
			names[nnames++] = strdup(b);
		} else if (!strcmp(kind, "passes")) {
			if (c->nfacts == cap)
				c->facts = realloc(c->facts, (cap *= 2) * sizeof *c->facts);
			pass_fact *pf = &c->facts[c->nfacts++];
			pf->err = a[0] == 'e' ? atoi(a + 1) : 0;
			pf->passes = a[0] == 'e' ? 0 : (size_t)strtoul(a, NULL, 10);
			pf->names = split_list(b, &pf->n);
			for (size_t i = 0; i < pf->n; i++) {
				size_t id = (size_t)strtoul(pf->names[i], NULL, 10);
				if (id >= nnames) {
					rc = -1;
					break;
				}
				free(pf->names[i]);
				pf->names[i] = names[id];
			}
		} else if (!strcmp(kind, "sublist")) {
			if (nlists == lcap)
				lists = realloc(lists, (lcap *= 2) * sizeof *lists);
			char **subs = split_list(b, &lists[nlists].n);
			for (size_t i = 0; i < lists[nlists].n; i++) { /* CUPTI's submetrics start with a dot */
				char *d = malloc(strlen(subs[i]) + 2);
				d[0] = '.';
				strcpy(d + 1, subs[i]);
				free(subs[i]);
				subs[i] = d;
			}
			lists[nlists++].subs = subs;
		} else if (!strcmp(kind, "submetrics")) {
			entry *e = find_base(c, a);
			size_t k = (size_t)strtoul(b, NULL, 10);
			if (e && k < nlists) {
				e->subs = (const char **)lists[k].subs;
				e->nsubs = lists[k].n;
			}
		}
	}
	fclose(f);
	free(lists);
	free(names); /* the strings stay: the facts point at them */
	if (rc != 0)
		fprintf(stderr, "fake libcupti: pass counts %s: a metric number out of order or undefined\n", path);
	return rc;
}

static int load_tsv(catalog *c, const char *path) {
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "fake libcupti: catalog %s: cannot open\n", path);
		return -1;
	}
	char line[1024];
	size_t cap = 2048;
	c->e = calloc(cap, sizeof *c->e);
	while (fgets(line, sizeof line, f)) {
		if (line[0] == '#' || line[0] == '\n')
			continue;
		line[strcspn(line, "\r\n")] = 0;
		char *save = NULL, *t = strtok_r(line, "\t", &save), *b = strtok_r(NULL, "\t", &save);
		char *h = strtok_r(NULL, "\t", &save), *d = strtok_r(NULL, "\t", &save);
		if (!t || !b)
			continue;
		if (c->n == cap)
			c->e = realloc(c->e, (cap *= 2) * sizeof *c->e);
		entry *e = &c->e[c->n++];
		e->type = !strcmp(t, "ratio") ? 1 : !strcmp(t, "throughput") ? 2 : 0;
		e->base = strdup(b);
		e->hw = strdup(h ? h : "");
		e->dim = strdup(d ? d : "");
		size_t n = strlen(b) + 32;
		e->desc = malloc(n);
		snprintf(e->desc, n, "fake description of %s", b);
	}
	fclose(f);
	for (int t = 0; t < 3; t++) {
		c->by_type[t] = calloc(c->n + 1, sizeof(char *));
		for (size_t i = 0; i < c->n; i++)
			if (c->e[i].type == t)
				c->by_type[t][c->nby_type[t]++] = c->e[i].base;
	}
	return 0;
}

/* catalog_for returns the catalog of chip (loading it once), or NULL when it cannot be read. */
static catalog *catalog_for_locked(const char *chip) {
	char path[600];
	int captured = catalogs_dir[0] != 0;
	if (captured)
		snprintf(path, sizeof path, "%s/%s.tsv", catalogs_dir, chip);
	else {
		const char *env = getenv("CUPTI_FAKE_CATALOG");
		snprintf(path, sizeof path, "%s", env && *env ? env : FAKE_DEFAULT_CATALOG);
	}
	for (size_t i = 0; i < ncatalogs; i++)
		if (!strcmp(catalogs[i].path, path))
			return &catalogs[i];
	if (ncatalogs == MAX_CATALOGS)
		return NULL;
	catalog *c = &catalogs[ncatalogs];
	memset(c, 0, sizeof *c);
	if (load_tsv(c, path) != 0)
		return NULL;
	if (captured) {
		char pp[600];
		snprintf(pp, sizeof pp, "%s/%s.passes", catalogs_dir, chip);
		if (load_passes(c, pp) != 0)
			return NULL;
	}
	c->path = strdup(path);
	c->captured = captured;
	ncatalogs++;
	return c;
}

/* Counter suffixes as CUPTI 13.0 lists them for GH100 (leading dot, 4 rollups x 11). */
static const char *sub_counter[] = {".avg", ".avg.peak_sustained", ".avg.peak_sustained_active",
				    ".avg.peak_sustained_active.per_second", ".avg.peak_sustained_elapsed",
				    ".avg.peak_sustained_elapsed.per_second", ".avg.per_cycle_active", ".avg.per_cycle_elapsed",
				    ".avg.per_second", ".avg.pct_of_peak_sustained_active", ".avg.pct_of_peak_sustained_elapsed", ".max",
				    ".max.peak_sustained", ".max.peak_sustained_active", ".max.peak_sustained_active.per_second",
				    ".max.peak_sustained_elapsed", ".max.peak_sustained_elapsed.per_second", ".max.per_cycle_active",
				    ".max.per_cycle_elapsed", ".max.per_second", ".max.pct_of_peak_sustained_active",
				    ".max.pct_of_peak_sustained_elapsed", ".min", ".min.peak_sustained", ".min.peak_sustained_active",
				    ".min.peak_sustained_active.per_second", ".min.peak_sustained_elapsed",
				    ".min.peak_sustained_elapsed.per_second", ".min.per_cycle_active", ".min.per_cycle_elapsed",
				    ".min.per_second", ".min.pct_of_peak_sustained_active", ".min.pct_of_peak_sustained_elapsed", ".sum",
				    ".sum.peak_sustained", ".sum.peak_sustained_active", ".sum.peak_sustained_active.per_second",
				    ".sum.peak_sustained_elapsed", ".sum.peak_sustained_elapsed.per_second", ".sum.per_cycle_active",
				    ".sum.per_cycle_elapsed", ".sum.per_second", ".sum.pct_of_peak_sustained_active",
				    ".sum.pct_of_peak_sustained_elapsed"};
static const char *sub_ratio[] = {".pct", ".ratio", ".max_rate"};
static const char *sub_throughput[] = {".avg.pct_of_peak_sustained_elapsed", ".max.pct_of_peak_sustained_elapsed",
				       ".min.pct_of_peak_sustained_elapsed", ".sum.pct_of_peak_sustained_elapsed"};
static const char **subs[3] = {sub_counter, sub_ratio, sub_throughput};
static const size_t nsubs[3] = {sizeof sub_counter / sizeof *sub_counter, sizeof sub_ratio / sizeof *sub_ratio,
				sizeof sub_throughput / sizeof *sub_throughput};

static const char **entry_subs(const entry *e, size_t *n) {
	if (e->subs) {
		*n = e->nsubs;
		return e->subs;
	}
	*n = nsubs[e->type];
	return subs[e->type];
}

/* lookup finds the catalog entry of name (a base, or base + a suffix of its type when full). */
static const entry *lookup_locked(const catalog *c, const char *name, int need_suffix) {
	if (!name || !c)
		return NULL;
	const entry *best = NULL;
	size_t bestlen = 0;
	for (size_t i = 0; i < c->n; i++) {
		size_t n = strlen(c->e[i].base);
		if (n > bestlen && !strncmp(name, c->e[i].base, n) && (name[n] == 0 || name[n] == '.')) {
			best = &c->e[i];
			bestlen = n;
		}
	}
	if (!best)
		return NULL;
	const char *suffix = name + bestlen;
	if (!*suffix)
		return need_suffix ? NULL : best;
	size_t ns;
	const char **ss = entry_subs(best, &ns);
	for (size_t i = 0; i < ns; i++)
		if (!strcmp(suffix, ss[i]))
			return best;
	return NULL;
}

/* The chips cuptiProfilerHostGetSupportedChips lists in CUPTI 13.0. */
static const char *chips[] = {"GV100", "GV11B", "TU102", "TU104", "TU106", "TU116", "TU117", "GA100", "GA102", "GA103",
			      "GA104", "GA106", "GA107", "GA10B", "GH100", "AD102", "AD103", "AD104", "AD106", "AD107",
			      "GB100", "GB102", "GB110", "GB10B", "GB202", "GB203", "GB205", "GB206", "GB207", "GB20B"};

static int known_chip(const char *c) {
	for (size_t i = 0; c && i < sizeof chips / sizeof *chips; i++)
		if (!strcmp(c, chips[i]))
			return 1;
	return 0;
}

/* Chips whose PM sampling has no GPU_TIME trigger (REFERENCE.md: Turing and GA100): SetConfig
 * refuses it with NOT_SUPPORTED, so the binding's SYSCLK fallback is exercised per chip. */
static const char *sysclk_only[] = {"TU102", "TU104", "TU106", "TU116", "TU117", "GA100"};

static int time_trigger_supported(const char *chip) {
	for (size_t i = 0; i < sizeof sysclk_only / sizeof *sysclk_only; i++)
		if (!strcmp(chip, sysclk_only[i]))
			return 0;
	return 1;
}

/* dev_chip_locked is the chip of device dev: the dev-th name of the chip knob, the last one
 * repeating; GH100 without the knob. */
static const char *dev_chip_locked(size_t dev) {
	static char names[MAX_DEV][32];
	if (!device_chip[0])
		return "GH100";
	const char *p = device_chip;
	for (size_t i = 0; i < dev; i++) {
		const char *slash = strchr(p, '/');
		if (!slash)
			break;
		p = slash + 1;
	}
	size_t n = strcspn(p, "/");
	if (n >= sizeof names[0])
		n = sizeof names[0] - 1;
	memcpy(names[dev % MAX_DEV], p, n);
	names[dev % MAX_DEV][n] = 0;
	return names[dev % MAX_DEV];
}

static int has_name(char *const *names, size_t n, const char *x) {
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], x))
			return 1;
	return 0;
}

/* subset reports whether every name of a (n) is in b (m). */
static int subset(char *const *a, size_t n, char *const *b, size_t m) {
	for (size_t i = 0; i < n; i++)
		if (!has_name(b, m, a[i]))
			return 0;
	return 1;
}

/* captured_passes answers a pass count from a capture, order aside: the set's own count; else
 * at least the count of a captured set it contains (a refusal stays a refusal); else 1 when it
 * lies within a captured one-pass set. Anything else was never measured: it counts in
 * passes_unknown and is answered 2 (not known to fit), so a test can tell. */
static size_t captured_passes(const catalog *c, char *const *names, size_t n, CUptiResult *err) {
	size_t most = 0;
	for (size_t i = 0; i < c->nfacts; i++) {
		const pass_fact *f = &c->facts[i];
		if (f->n == n && subset(names, n, f->names, f->n)) {
			*err = f->err;
			return f->passes;
		}
	}
	for (size_t i = 0; i < c->nfacts; i++) {
		const pass_fact *f = &c->facts[i];
		if (f->n < n && subset(f->names, f->n, names, n)) {
			if (f->err) {
				*err = f->err;
				return 0;
			}
			if (f->passes > most)
				most = f->passes;
		}
	}
	if (most > 1)
		return most;
	for (size_t i = 0; i < c->nfacts; i++) {
		const pass_fact *f = &c->facts[i];
		if (!f->err && f->passes == 1 && f->n > n && subset(names, n, f->names, f->n))
			return 1;
	}
	Q.passes_unknown++;
	return 2;
}

/* ---- objects --------------------------------------------------------------------------------- */

struct CUpti_Profiler_Host_Object {
	unsigned magic;
	catalog *cat;
	char **metrics;
	size_t n;
};
#define HOST_MAGIC 0x484f5354u

struct CUpti_PmSampling_Object {
	unsigned magic;
	int hostfd; /* the host-wide claim on the device's counters (host_claim), -1: none */
	int dev, configured, started, stopped, dead, keep_latest;
	int ever_started, silent; /* silent: configured again after a Start (see cuptiPmSamplingSetConfig) */
	int full_images; /* some image of this session had a COUNTER_DATA_FULL decode */
	uint32_t cfg_metrics; /* metrics in the config of the last SetConfig */
	catalog *cat;         /* the device chip's, for counter data sizes */
	int time_trigger;     /* the device chip has the GPU_TIME trigger */
	uint64_t iv, hwbuf_samples, t0, t_stop, next_k, decodes;
	size_t cd_metrics, cd_capacity, cd_size;
	/* split_every: the newest sample of a decode was left half decoded in split_img */
	int split_pending;
	uint64_t split_k, split_gen;
	void *split_img;
};
#define SPLIT_SCALE 4.258
#define PM_MAGIC 0x504d534du

static CUpti_PmSampling_Object *enabled[MAX_DEV];

#define CFG_MAGIC "FAKECFG"
typedef struct {
	char magic[8];
	uint32_t n;
	uint32_t cat; /* index of the host's catalog in catalogs[] */
} cfg_header;

#define CD_MAGIC "FAKECD1"
typedef struct {
	char magic[8];
	uint32_t nmetrics, capacity, populated;
	uint32_t full; /* a decode stopped with COUNTER_DATA_FULL: Initialize now returns 999 */
	uint32_t completed; /* populated minus a sample still being decoded (split_every) */
	uint64_t gen;       /* which initialisation this is: a split sample completes only in its own */
} cd_header;
typedef struct {
	uint64_t k, start, end;
	uint64_t part; /* 0: whole; 1: only the records after a split (split_every) */
} cd_slot;
static cd_header *image(const uint8_t *img, size_t size);

static size_t cd_size(size_t nmetrics, size_t capacity) {
	return 2560 + capacity * (sizeof(cd_slot) + 8 * nmetrics);
}

#define CHECK_SIZE(p, T)                                      \
	do {                                                  \
		if (!(p) || (p)->structSize != T##_STRUCT_SIZE) \
			return E_PARAM;                       \
	} while (0)

static int live_host(CUpti_Profiler_Host_Object *h) { return h && h->magic == HOST_MAGIC; }
static int live_pm(CUpti_PmSampling_Object *o) { return o && o->magic == PM_MAGIC; }

/* ---- common ---------------------------------------------------------------------------------- */

CUptiResult cuptiGetVersion(uint32_t *v) {
	if (!v)
		return E_PARAM;
	LOCK();
	*v = F.version;
	UNLOCK();
	return OK;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
	static const struct {
		int r;
		const char *s;
	} names[] = {{0, "CUPTI_SUCCESS"},
		     {1, "CUPTI_ERROR_INVALID_PARAMETER"},
		     {2, "CUPTI_ERROR_INVALID_DEVICE"},
		     {7, "CUPTI_ERROR_INVALID_OPERATION"},
		     {11, "CUPTI_ERROR_API_NOT_IMPLEMENTED"},
		     {8, "CUPTI_ERROR_OUT_OF_MEMORY"},
		     {15, "CUPTI_ERROR_NOT_INITIALIZED"},
		     {17, "CUPTI_ERROR_INVALID_METRIC_NAME"},
		     {26, "CUPTI_ERROR_HARDWARE_BUSY"},
		     {27, "CUPTI_ERROR_NOT_SUPPORTED"},
		     {35, "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"},
		     {46, "CUPTI_ERROR_INVALID_CHIP_NAME"},
		     {999, "CUPTI_ERROR_UNKNOWN"}};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (names[i].r == r) {
			*s = names[i].s;
			return OK;
		}
	return E_PARAM;
}

CUptiResult cuptiGetTimestamp(uint64_t *ts) {
	*ts = now_ns();
	return OK;
}

/* As on the H200: initialising again after a DeInitialize returns 39. */
CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Initialize_Params);
	CUptiResult r = OK;
	LOCK();
	if (Q.deinit)
		r = E_SUBSCRIBERS;
	else
		Q.init++;
	UNLOCK();
	return r;
}

CUptiResult cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_DeInitialize_Params);
	LOCK();
	Q.deinit++;
	UNLOCK();
	return OK;
}

CUptiResult cuptiProfilerDeviceSupported(CUpti_Profiler_DeviceSupported_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_DeviceSupported_Params);
	if (p->cuDevice < 0 || p->cuDevice >= ndev())
		return E_DEVICE;
	const int S = CUPTI_PROFILER_CONFIGURATION_SUPPORTED, U = CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED;
	LOCK();
	p->architecture = F.unsupported_arch ? U : S;
	p->vGpu = F.unsupported_vgpu ? CUPTI_PROFILER_CONFIGURATION_DISABLED : S;
	p->confidentialCompute = F.unsupported_cc ? U : S;
	UNLOCK();
	p->sli = p->cmp = p->wsl = S;
	int all = p->architecture == S && p->vGpu == S && p->confidentialCompute == S;
	/* Anything but PM_SAMPLING asks about another API, which this fake does not support. */
	p->isSupported = all && p->api == CUPTI_PROFILER_PM_SAMPLING ? S : U;
	return OK;
}

CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params *p) {
	CHECK_SIZE(p, CUpti_Device_GetChipName_Params);
	if (p->deviceIndex >= (size_t)ndev())
		return E_DEVICE;
	LOCK();
	p->pChipName = dev_chip_locked(p->deviceIndex); /* a static buffer: the binding copies it */
	UNLOCK();
	return OK;
}

/* ---- host-wide counters --------------------------------------------------------------------- */

/* One PM session per device exists host-wide, as on a real GPU: with $CUPTI_FAKE_HOST_DIR set, a
 * configured session claims the device with an exclusive flock on DIR/counters-<dev> (released by
 * Disable or by the process's exit), and while another session, of this process or another one,
 * holds it SetConfig and the availability fill call return 26 HARDWARE_BUSY, as on an H100/H200
 * (docs/gpu-validation.md run BK). Without the variable every process has its own counters. */
static int host_open(int dev) {
	const char *dir = getenv("CUPTI_FAKE_HOST_DIR");
	if (!dir || !*dir)
		return -1;
	char path[600];
	snprintf(path, sizeof path, "%s/counters-%d", dir, dev);
	return open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
}

/* host_claim returns the claiming fd (keep it open to hold), -1 without a host dir, -2 when busy. */
static int host_claim(int dev) {
	int fd = host_open(dev);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		close(fd);
		return -2;
	}
	return fd;
}

/* host_busy reports whether another session holds the device's counters. */
static int host_busy(int dev) {
	int fd = host_claim(dev);
	if (fd == -2)
		return 1;
	if (fd >= 0)
		close(fd);
	return 0;
}

/* ---- PM sampling ----------------------------------------------------------------------------- */

CUptiResult cuptiPmSamplingGetCounterAvailability(CUpti_PmSampling_GetCounterAvailability_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_GetCounterAvailability_Params);
	if (p->deviceIndex >= (size_t)ndev())
		return E_DEVICE;
	if (!p->pCounterAvailabilityImage) {
		p->counterAvailabilityImageSize = AVAIL_SIZE;
		return OK;
	}
	LOCK();
	int busy = F.busy_setconfig;
	UNLOCK();
	if (busy || host_busy((int)p->deviceIndex))
		return E_BUSY;
	if (p->counterAvailabilityImageSize < AVAIL_SIZE)
		return E_PARAM;
	memset(p->pCounterAvailabilityImage, 0xA5, AVAIL_SIZE);
	return OK;
}

CUptiResult cuptiPmSamplingEnable(CUpti_PmSampling_Enable_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_Enable_Params);
	if (p->deviceIndex >= (size_t)ndev())
		return E_DEVICE;
	CUptiResult r = OK;
	LOCK();
	if (F.insufficient_privileges)
		r = E_PRIVILEGES;
	else if (F.needs_nvperf_target && !nvperf_target_loaded())
		r = E_NOT_INIT;
	else if (enabled[p->deviceIndex])
		r = E_OPERATION;
	else {
		CUpti_PmSampling_Object *o = calloc(1, sizeof *o);
		o->magic = PM_MAGIC;
		o->hostfd = -1;
		o->dev = (int)p->deviceIndex;
		o->cat = catalog_for_locked(dev_chip_locked(p->deviceIndex));
		o->time_trigger = time_trigger_supported(dev_chip_locked(p->deviceIndex));
		enabled[o->dev] = o;
		p->pPmSamplingObject = o;
		Q.sessions++;
		Q.enables++;
	}
	UNLOCK();
	return r;
}

static size_t config_passes(const uint8_t *img, size_t size, CUptiResult *err) {
	const cfg_header *h = (const cfg_header *)img;
	*err = OK;
	if (!img || size < sizeof *h || memcmp(h->magic, CFG_MAGIC, 8)) {
		*err = E_PARAM;
		return 0;
	}
	const char *s = (const char *)(h + 1);
	LOCK();
	const catalog *c = h->cat < ncatalogs ? &catalogs[h->cat] : NULL;
	if (c && c->captured) {
		char **names = calloc(h->n + 1, sizeof *names);
		for (uint32_t i = 0; i < h->n; i++, s += strlen(s) + 1)
			names[i] = (char *)s;
		size_t n = captured_passes(c, names, h->n, err);
		free(names);
		UNLOCK();
		return n;
	}
	UNLOCK();
	for (uint32_t i = 0; i < h->n; i++, s += strlen(s) + 1)
		if (!strncmp(s, "sm__throughput.", 15))
			return 19;
	return (h->n + 7) / 8;
}

CUptiResult cuptiPmSamplingSetConfig(CUpti_PmSampling_SetConfig_Params *p) {
	if (!p || (p->structSize != CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE &&
		   p->structSize != CX_SETCONFIG_STRUCT_SIZE_PRE_APPEND_MODE))
		return E_PARAM;
	CUptiResult r = OK;
	size_t passes = config_passes(p->pConfig, p->configSize, &r);
	if (r != OK)
		return r;
	if (p->samplingInterval == 0 || p->hardwareBufferSize == 0 || p->triggerMode > 1)
		return E_PARAM;
	int append = p->structSize == CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE ? (int)p->hwBufferAppendMode : 0;
	LOCK();
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	if (!live_pm(o))
		r = E_PARAM;
	else if (o->started)
		r = E_OPERATION;
	else if (p->triggerMode == CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL && !o->time_trigger)
		r = E_NOT_SUPPORTED;
	else if (F.busy_setconfig)
		r = E_BUSY;
	else if (F.busy_once) {
		F.busy_once = 0;
		r = E_BUSY;
	} else if (passes != 1)
		r = E_NOT_SUPPORTED;
	else if (o->hostfd < 0 && (o->hostfd = host_claim(o->dev)) == -2) {
		o->hostfd = -1;
		r = E_BUSY;
	} else {
		/* As an H200 with CUPTI 13.0 did (run M, 2026-11-23): SetConfig after a Start in the
		 * same session succeeds, and the session then yields no sample until Disable. */
		o->silent = o->silent || o->ever_started;
		o->configured = 1;
		o->cfg_metrics = ((const cfg_header *)p->pConfig)->n;
		o->iv = p->samplingInterval; /* ns in TIME mode; SYSCLK cycles at a nominal 1 GHz */
		o->hwbuf_samples = p->hardwareBufferSize / SAMPLE_HWBYTES;
		o->keep_latest = append == CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST;
		Q.sc_struct_size = p->structSize;
		Q.sc_interval = p->samplingInterval;
		Q.sc_trigger = (unsigned long long)p->triggerMode;
		Q.sc_append = (unsigned long long)append;
		Q.sc_hwbuf = p->hardwareBufferSize;
	}
	UNLOCK();
	return r;
}

static int valid_names_locked(const catalog *c, const char **names, size_t n) {
	if (!names || n == 0)
		return E_PARAM;
	for (size_t i = 0; i < n; i++)
		if (!lookup_locked(c, names[i], 1))
			return E_METRIC;
	return OK;
}

CUptiResult cuptiPmSamplingGetCounterDataSize(CUpti_PmSampling_GetCounterDataSize_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_GetCounterDataSize_Params);
	LOCK();
	CUptiResult r = live_pm(p->pPmSamplingObject) ? valid_names_locked(p->pPmSamplingObject->cat, p->pMetricNames, p->numMetrics) : E_PARAM;
	if (r == OK && p->maxSamples == 0)
		r = E_PARAM;
	if (r == OK) {
		CUpti_PmSampling_Object *o = p->pPmSamplingObject;
		o->cd_metrics = p->numMetrics;
		o->cd_capacity = p->maxSamples;
		o->cd_size = p->counterDataSize = cd_size(p->numMetrics, p->maxSamples);
	}
	UNLOCK();
	return r;
}

CUptiResult cuptiPmSamplingCounterDataImageInitialize(CUpti_PmSampling_CounterDataImage_Initialize_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_CounterDataImage_Initialize_Params);
	CUptiResult r = OK;
	LOCK();
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	/* An image initialised before keeps its layout (metrics, capacity): with several groups
	 * (multiplexing) each group's image is re-initialised after its own decode, whatever
	 * GetCounterDataSize was asked last. A new image takes the layout of the last query. */
	cd_header *old = live_pm(o) ? image(p->pCounterData, p->counterDataSize) : NULL;
	size_t want = old ? cd_size(old->nmetrics, old->capacity) : (live_pm(o) ? o->cd_size : 0);
	if (!live_pm(o) || !p->pCounterData || !want || p->counterDataSize != want)
		r = E_PARAM;
	else if (old && o->full_images && old->full)
		r = E_UNKNOWN;
	else {
		cd_header *h = (cd_header *)p->pCounterData;
		uint32_t nm = old ? old->nmetrics : (uint32_t)o->cd_metrics, cap = old ? old->capacity : (uint32_t)o->cd_capacity;
		static uint64_t gens;
		memset(h, 0, sizeof *h);
		memcpy(h->magic, CD_MAGIC, 8);
		h->gen = ++gens;
		h->nmetrics = nm;
		h->capacity = cap;
	}
	UNLOCK();
	return r;
}

CUptiResult cuptiPmSamplingStart(CUpti_PmSampling_Start_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_Start_Params);
	CUptiResult r = OK;
	LOCK();
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	if (!live_pm(o))
		r = E_PARAM;
	else if (!o->configured || o->started)
		r = E_OPERATION;
	else {
		o->started = 1;
		o->ever_started = 1;
		o->stopped = 0;
		o->t0 = now_ns();
		o->next_k = 0;
	}
	UNLOCK();
	return r;
}

CUptiResult cuptiPmSamplingStop(CUpti_PmSampling_Stop_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_Stop_Params);
	CUptiResult r = OK;
	LOCK();
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	if (!live_pm(o))
		r = E_PARAM;
	else if (!o->started)
		r = E_OPERATION;
	else {
		o->started = 0;
		o->stopped = 1;
		o->t_stop = now_ns();
	}
	UNLOCK();
	return r;
}

CUptiResult cuptiPmSamplingDisable(CUpti_PmSampling_Disable_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_Disable_Params);
	CUptiResult r = OK;
	LOCK();
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	if (!live_pm(o))
		r = E_PARAM;
	else {
		enabled[o->dev] = NULL;
		o->magic = 0;
		if (o->hostfd >= 0)
			close(o->hostfd);
		free(o);
		Q.sessions--;
	}
	UNLOCK();
	return r;
}

static cd_header *image(const uint8_t *img, size_t size) {
	cd_header *h = (cd_header *)img;
	if (!img || size < sizeof *h || memcmp(h->magic, CD_MAGIC, 8) || size < cd_size(h->nmetrics, h->capacity))
		return NULL;
	return h;
}

CUptiResult cuptiPmSamplingDecodeData(CUpti_PmSampling_DecodeData_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_DecodeData_Params);
	CUptiResult r = OK;
	LOCK();
	Q.decode_tid = (unsigned long long)gettid();
	CUpti_PmSampling_Object *o = p->pPmSamplingObject;
	cd_header *h = image(p->pCounterDataImage, p->counterDataImageSize);
	p->overflow = 0;
	p->decodeStopReason = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER;
	if (!live_pm(o) || !h) {
		r = E_PARAM;
		goto out;
	}
	if (!o->configured) {
		r = E_OPERATION;
		goto out;
	}
	if (h->nmetrics != o->cfg_metrics) { /* an image of another group's config */
		r = E_PARAM;
		goto out;
	}
	o->decodes++;
	if (F.late_every && o->decodes % F.late_every == 0) {
		struct timespec late = {F.late_ms / 1000, (long)(F.late_ms % 1000) * 1000000L};
		UNLOCK(); /* the other devices go on meanwhile; this device's thread is the one decoding */
		nanosleep(&late, NULL);
		LOCK();
	}
	if (F.overflow_at && o->decodes == F.overflow_at)
		o->dead = 1;
	uint64_t avail = 0;
	if ((o->started || o->stopped) && !o->silent) {
		if (F.samples_per_decode)
			avail = o->started ? F.samples_per_decode : 0;
		else {
			uint64_t until = o->started ? now_ns() : o->t_stop;
			uint64_t total = until > o->t0 ? (until - o->t0) / o->iv : 0;
			avail = total > o->next_k ? total - o->next_k : 0;
			if (avail > o->hwbuf_samples) {
				if (o->keep_latest) {
					o->next_k = total - o->hwbuf_samples;
					avail = o->hwbuf_samples;
				} else
					o->dead = 1;
			}
		}
	}
	if (o->dead) {
		p->overflow = 1;
		r = E_MEMORY;
		goto out;
	}
	cd_slot *slots = (cd_slot *)(h + 1);
	if (o->split_pending && h == o->split_img && h->gen == o->split_gen) {
		h->completed = h->populated; /* the same image, not re-initialised: the sample completes */
		o->split_pending = 0;
	} else if (o->split_pending && h->populated < h->capacity) {
		/* The image holding the first part was re-initialised (or another is decoded into): the
		 * rest of the sample's records make a sample of their own, as on an H100 (run AH). */
		cd_slot *s = &slots[h->populated++];
		s->k = o->split_k;
		s->start = o->t0 + o->split_k * o->iv;
		s->end = s->start + o->iv;
		s->part = 1;
		h->completed = h->populated;
		o->split_pending = 0;
	}
	uint64_t space = h->capacity - h->populated, n = avail < space ? avail : space;
	if (F.image_full && avail > 1 && n > avail / 2)
		n = avail / 2; /* the image takes half of what waits; the rest is lost */
	for (uint64_t j = 0; j < n; j++) {
		uint64_t k = o->next_k++;
		if (F.skip_every > 1 && k % F.skip_every == F.skip_every - 1)
			continue; /* the hardware lost this one: a hole in the time line */
		cd_slot *s = &slots[h->populated++];
		s->k = k;
		s->start = o->t0 + k * o->iv;
		s->end = s->start + o->iv;
		s->part = 0;
		if (k == 0 && F.first_sample_before_start)
			s->start = o->t0 - FIRST_SAMPLE_EARLY_NS;
	}
	h->completed = h->populated;
	if (F.split_every && o->started && n > 1 && o->decodes % F.split_every == 0) {
		/* The decode stops inside the newest sample: populated, not completed (run AH). */
		h->completed = h->populated - 1;
		o->split_pending = 1;
		o->split_k = slots[h->populated - 1].k;
		o->split_img = h;
		o->split_gen = h->gen;
	}
	if (avail > n) /* as on the H200: the records beyond a full image are lost */
		o->next_k += avail - n;
	if (avail > n) {
		p->decodeStopReason = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL;
		h->full = 1;
		o->full_images = 1;
	}
	else if (!o->started)
		p->decodeStopReason = CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS;
out:
	UNLOCK();
	return r;
}

CUptiResult cuptiPmSamplingGetCounterDataInfo(CUpti_PmSampling_GetCounterDataInfo_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_GetCounterDataInfo_Params);
	cd_header *h = image(p->pCounterDataImage, p->counterDataImageSize);
	if (!h)
		return E_PARAM;
	p->numTotalSamples = h->capacity;
	p->numPopulatedSamples = h->populated;
	p->numCompletedSamples = h->completed;
	return OK;
}

CUptiResult cuptiPmSamplingCounterDataGetSampleInfo(CUpti_PmSampling_CounterData_GetSampleInfo_Params *p) {
	CHECK_SIZE(p, CUpti_PmSampling_CounterData_GetSampleInfo_Params);
	cd_header *h = image(p->pCounterDataImage, p->counterDataImageSize);
	if (!h || p->sampleIndex >= h->populated)
		return E_PARAM;
	cd_slot *s = (cd_slot *)(h + 1) + p->sampleIndex;
	p->startTimestamp = s->start;
	p->endTimestamp = s->end;
	return OK;
}

/* ---- Profiler host --------------------------------------------------------------------------- */

/* Single-pass sets (13.2) of GH100: full names from the catalog, one pass each under the pass rule. */
static const char *set_triage[] = {"gr__cycles_active.avg.pct_of_peak_sustained_elapsed",
				   "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
				   "sm__warps_active.avg.pct_of_peak_sustained_active",
				   "dram__throughput.avg.pct_of_peak_sustained_elapsed",
				   "pcie__read_bytes.sum.per_second",
				   "pcie__write_bytes.sum.per_second"};
static const char *set_throughput[] = {"dram__throughput.avg.pct_of_peak_sustained_elapsed",
				       "lts__throughput.avg.pct_of_peak_sustained_elapsed",
				       "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
				       "pcie__throughput.avg.pct_of_peak_sustained_elapsed",
				       "fe__throughput.avg.pct_of_peak_sustained_elapsed"};
static const struct {
	const char *name;
	const char **metrics;
	size_t n;
} sets[] = {{"TriageCompute", set_triage, sizeof set_triage / sizeof *set_triage},
	    {"Throughput", set_throughput, sizeof set_throughput / sizeof *set_throughput}};
#define NSETS (sizeof sets / sizeof *sets)

/* find_set returns the index of the chip's set, or -1. Only GH100 has sets. */
static int find_set(const char *chip, const char *name) {
	if (!chip || !name || strcmp(chip, "GH100"))
		return -1;
	for (size_t i = 0; i < NSETS; i++)
		if (!strcmp(name, sets[i].name))
			return (int)i;
	return -1;
}

static uint32_t version(void) {
	LOCK();
	uint32_t v = F.version;
	UNLOCK();
	return v;
}

/* HostInitialize takes the 13.0 STRUCT_SIZE (48) always, and the 13.2 one (56, with
 * pSinglePassMetricSetName) from version 130200; a named set must exist for the chip. */
CUptiResult cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params *p) {
	int v13_2 = p && p->structSize == CX_HOST_INITIALIZE_STRUCT_SIZE_13_2 && version() >= 130200;
	if (!p || (p->structSize != CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE && !v13_2))
		return E_PARAM;
	const char *set = v13_2 ? ((cx_Host_Initialize_Params_13_2 *)p)->pSinglePassMetricSetName : NULL;
	if (p->profilerType != CUPTI_PROFILER_TYPE_PM_SAMPLING)
		return E_NOT_SUPPORTED;
	if (!known_chip(p->pChipName))
		return E_CHIP;
	if (p->pCounterAvailabilityImage && p->pCounterAvailabilityImage[0] != 0xA5)
		return E_PARAM; /* as the real library does for a zeroed image */
	if (set && find_set(p->pChipName, set) < 0)
		return E_PARAM;
	CUptiResult r = OK;
	LOCK();
	if (F.nvperf_missing)
		r = E_NOT_INIT;
	else if (!catalog_for_locked(p->pChipName))
		r = E_UNKNOWN;
	else {
		CUpti_Profiler_Host_Object *h = calloc(1, sizeof *h);
		h->magic = HOST_MAGIC;
		h->cat = catalog_for_locked(p->pChipName);
		p->pHostObject = h;
		Q.hosts++;
		Q.hosts_with_set += set != NULL;
		Q.host_init_size = p->structSize;
	}
	UNLOCK();
	return r;
}

CUptiResult cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_Deinitialize_Params);
	CUpti_Profiler_Host_Object *h = p->pHostObject;
	LOCK();
	if (!live_host(h)) {
		UNLOCK();
		return E_PARAM;
	}
	for (size_t i = 0; i < h->n; i++)
		free(h->metrics[i]);
	free(h->metrics);
	h->magic = 0;
	free(h);
	Q.hosts--;
	UNLOCK();
	return OK;
}

CUptiResult cuptiProfilerHostGetSupportedChips(CUpti_Profiler_Host_GetSupportedChips_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetSupportedChips_Params);
	p->numChips = sizeof chips / sizeof *chips;
	p->ppChipNames = chips;
	return OK;
}

CUptiResult cuptiProfilerHostGetBaseMetrics(CUpti_Profiler_Host_GetBaseMetrics_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetBaseMetrics_Params);
	if (!live_host(p->pHostObject) || p->metricType < 0 || p->metricType > 2)
		return E_PARAM;
	p->ppMetricNames = p->pHostObject->cat->by_type[p->metricType];
	p->numMetrics = p->pHostObject->cat->nby_type[p->metricType];
	return OK;
}

CUptiResult cuptiProfilerHostGetSubMetrics(CUpti_Profiler_Host_GetSubMetrics_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetSubMetrics_Params);
	if (!live_host(p->pHostObject))
		return E_PARAM;
	LOCK();
	const entry *e = lookup_locked(p->pHostObject->cat, p->pMetricName, 0);
	UNLOCK();
	if (!e || (int)p->metricType != e->type)
		return E_METRIC;
	size_t n;
	p->ppSubMetrics = entry_subs(e, &n);
	p->numOfSubmetrics = n;
	return OK;
}

/* As the real library does (seen on the H200), a full name reports the unit of its
 * submetric: "percent" for .pct_of_peak_*, "<dim>/second" for .per_second. */
static const char *full_name_dim_unit(const char *name, const char *dim) {
	static __thread char buf[128];
	if (strstr(name, ".pct_of_peak"))
		return "percent";
	if (strstr(name, ".per_second")) {
		snprintf(buf, sizeof buf, "%s/second", dim);
		return buf;
	}
	return dim;
}

CUptiResult cuptiProfilerHostGetMetricProperties(CUpti_Profiler_Host_GetMetricProperties_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetMetricProperties_Params);
	if (!live_host(p->pHostObject))
		return E_PARAM;
	LOCK();
	const entry *e = lookup_locked(p->pHostObject->cat, p->pMetricName, 0);
	UNLOCK();
	if (!e)
		return E_METRIC;
	p->pDescription = e->desc;
	p->pHwUnit = e->hw;
	p->pDimUnit = full_name_dim_unit(p->pMetricName, e->dim);
	p->metricType = (CUpti_MetricType)e->type;
	return OK;
}

CUptiResult cuptiProfilerHostGetMaxNumHardwareMetricsPerPass(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params);
	if (p->profilerType != CUPTI_PROFILER_TYPE_PM_SAMPLING)
		return E_NOT_SUPPORTED;
	if (!known_chip(p->pChipName))
		return E_CHIP;
	p->maxMetricsPerPass = 212;
	return OK;
}

CUptiResult cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_ConfigAddMetrics_Params);
	CUpti_Profiler_Host_Object *h = p->pHostObject;
	if (!live_host(h))
		return E_PARAM;
	LOCK();
	CUptiResult r = valid_names_locked(h->cat, p->ppMetricNames, p->numMetrics);
	if (r == OK) {
		h->metrics = realloc(h->metrics, (h->n + p->numMetrics) * sizeof *h->metrics);
		for (size_t i = 0; i < p->numMetrics; i++)
			h->metrics[h->n++] = strdup(p->ppMetricNames[i]);
	}
	UNLOCK();
	return r;
}

static size_t config_size(const CUpti_Profiler_Host_Object *h) {
	size_t n = sizeof(cfg_header);
	for (size_t i = 0; i < h->n; i++)
		n += strlen(h->metrics[i]) + 1;
	return n;
}

CUptiResult cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetConfigImageSize_Params);
	if (!live_host(p->pHostObject) || p->pHostObject->n == 0)
		return E_PARAM;
	p->configImageSize = config_size(p->pHostObject);
	return OK;
}

CUptiResult cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetConfigImage_Params);
	CUpti_Profiler_Host_Object *h = p->pHostObject;
	if (!live_host(h) || !p->pConfigImage || p->configImageSize < config_size(h))
		return E_PARAM;
	cfg_header *c = (cfg_header *)p->pConfigImage;
	memcpy(c->magic, CFG_MAGIC, 8);
	c->n = (uint32_t)h->n;
	c->cat = (uint32_t)(h->cat - catalogs);
	char *s = (char *)(c + 1);
	for (size_t i = 0; i < h->n; i++) {
		size_t n = strlen(h->metrics[i]) + 1;
		memcpy(s, h->metrics[i], n);
		s += n;
	}
	return OK;
}

CUptiResult cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetNumOfPasses_Params);
	CUptiResult r;
	p->numOfPasses = config_passes(p->pConfigImage, p->configImageSize, &r);
	return r;
}

CUptiResult cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_EvaluateToGpuValues_Params);
	__atomic_store_n(&Q.evaluate_tid, (unsigned long long)gettid(), __ATOMIC_RELAXED);
	if (!live_host(p->pHostObject) || !p->pMetricValues)
		return E_PARAM;
	cd_header *h = image(p->pCounterDataImage, p->counterDataImageSize);
	if (!h || p->rangeIndex >= h->populated || p->numMetrics != h->nmetrics)
		return E_PARAM;
	/* The name check walks the catalog; remember the last list that passed (callers reuse one
	 * array per counter data image), so evaluation costs next to nothing, as a benchmark of the
	 * caller's own per-sample work needs. */
	static const char *const *checked;
	static size_t nchecked;
	CUptiResult r = OK;
	LOCK();
	if (p->ppMetricNames != checked || p->numMetrics != nchecked) {
		r = valid_names_locked(p->pHostObject->cat, p->ppMetricNames, p->numMetrics);
		if (r == OK) {
			checked = (const char *const *)p->ppMetricNames;
			nchecked = p->numMetrics;
		}
	}
	UNLOCK();
	if (r != OK)
		return r;
	LOCK();
	unsigned cost = F.eval_cost_us;
	UNLOCK();
	if (cost) { /* a slow host: this evaluation takes cost microseconds of wall time */
		struct timespec d = {(time_t)(cost / 1000000), (long)(cost % 1000000) * 1000};
		nanosleep(&d, NULL);
	}
	cd_slot *slot = (cd_slot *)(h + 1) + p->rangeIndex;
	uint64_t k = slot->k;
	/* A sample made of only the records after a split reads SPLIT_SCALE times its value, as
	 * TPC.TriageCompute.sm__cycles_active did on an H100 (4.258: 425.8 % where 100 % ran). */
	double scale = slot->part ? SPLIT_SCALE : 1.0;
	for (size_t j = 0; j < p->numMetrics; j++)
		p->pMetricValues[j] = scale * (10.0 * (double)(j + 1) + (double)(k % 10));
	return OK;
}

/* ---- single-pass sets (13.2) ------------------------------------------------------------------ */

#ifndef FAKE_NO_SINGLE_PASS_SETS
/* Two-phase: ppSinglePassSets NULL reports the count; then the caller's array of that many
 * pointers is filled. */
CUptiResult cuptiProfilerHostGetSinglePassSets(CUpti_Profiler_Host_GetSinglePassSets_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetSinglePassSets_Params);
	if (version() < 130200)
		return E_NOT_IMPLEMENTED;
	if (!known_chip(p->pChipName))
		return E_CHIP;
	size_t n = strcmp(p->pChipName, "GH100") ? 0 : NSETS;
	if (!p->ppSinglePassSets) {
		p->numOfSinglePassSets = n;
		return OK;
	}
	if (p->numOfSinglePassSets < n)
		return E_PARAM;
	for (size_t i = 0; i < n; i++)
		p->ppSinglePassSets[i] = sets[i].name;
	p->numOfSinglePassSets = n;
	return OK;
}

/* Two-phase: both buffers NULL reports the metric count and the bytes of the name buffer (the
 * names, each NUL-terminated, back to back); then indices[i] is the offset of metric i in the
 * buffer. Exactly one NULL buffer is INVALID_PARAMETER, as are counts smaller than reported. */
CUptiResult cuptiProfilerHostGetMetricsInSinglePassSet(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params *p) {
	CHECK_SIZE(p, CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params);
	if (version() < 130200)
		return E_NOT_IMPLEMENTED;
	if (!known_chip(p->pChipName))
		return E_CHIP;
	int s = find_set(p->pChipName, p->pSinglePassSetName);
	if (s < 0)
		return E_PARAM;
	size_t bytes = 0;
	for (size_t i = 0; i < sets[s].n; i++)
		bytes += strlen(sets[s].metrics[i]) + 1;
	if (!p->pMetricsIndicesBuffer != !p->pMetricsBuffer)
		return E_PARAM;
	if (!p->pMetricsBuffer) {
		p->numOfMetricsInSinglePassSet = sets[s].n;
		p->metricsBufferSize = bytes;
		return OK;
	}
	if (p->numOfMetricsInSinglePassSet < sets[s].n || p->metricsBufferSize < bytes)
		return E_PARAM;
	size_t off = 0;
	for (size_t i = 0; i < sets[s].n; i++) {
		size_t n = strlen(sets[s].metrics[i]) + 1;
		p->pMetricsIndicesBuffer[i] = off;
		memcpy(p->pMetricsBuffer + off, sets[s].metrics[i], n);
		off += n;
	}
	p->numOfMetricsInSinglePassSet = sets[s].n;
	p->metricsBufferSize = bytes;
	return OK;
}
#endif
