/* config.c: CUPTI_EXPORTER_* environment variables, read once at init and
 * validated; a bad value keeps the default and logs one warning. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"

static int log_level = 1;

void cx_log(int level, const char *fmt, ...)
{
	if (level > log_level)
		return;
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "cupti-exporter-inject[%d]: %s\n", (int)getpid(), line);
}

/* Parses an integer with an optional K/M/G suffix (powers of 1024). */
static int parse_size(const char *s, unsigned long long *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	unsigned long long mul = 1;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30, end++;
	if (*end || v > (~0ull) / mul)
		return -1;
	*out = v * mul;
	return 0;
}

static void get_size(const char *name, unsigned long long lo, unsigned long long hi, unsigned long long *v)
{
	const char *s = getenv(name);
	unsigned long long x;
	if (!s || !*s)
		return;
	if (parse_size(s, &x) || x < lo || x > hi) {
		cx_log(1, "ignoring %s=%s: want an integer in %llu..%llu; using %llu", name, s, lo, hi, *v);
		return;
	}
	*v = x;
}

static int get_int(const char *name, int lo, int hi, int def)
{
	unsigned long long v = (unsigned long long)def;
	get_size(name, (unsigned long long)lo, (unsigned long long)hi, &v);
	return (int)v;
}

static void get_str(const char *name, char *dst, size_t cap)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return;
	if (strlen(s) >= cap) {
		cx_log(1, "ignoring %s: longer than %zu bytes; using %s", name, cap - 1, dst[0] ? dst : "the default");
		return;
	}
	strcpy(dst, s);
}

static void get_kinds(struct cx_config *c)
{
	const char *s = getenv("CUPTI_EXPORTER_KINDS");
	if (!s || !*s)
		return;
	int k = 0, mc = 0, ms = 0, pp = 0, bad = 0;
	char buf[128];
	snprintf(buf, sizeof buf, "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		if (!strcmp(t, "kernel"))
			k = 1;
		else if (!strcmp(t, "memcpy"))
			mc = 1;
		else if (!strcmp(t, "memset"))
			ms = 1;
		else if (!strcmp(t, "ptop"))
			pp = 1;
		else
			bad = 1;
	}
	if (bad || !(k || mc || ms || pp)) {
		cx_log(1, "ignoring CUPTI_EXPORTER_KINDS=%s: want a comma list of kernel,memcpy,memset,ptop; tracing all", s);
		return;
	}
	c->kernel = k, c->memcpy = mc, c->memset = ms, c->ptop = pp;
}

static void get_duty(struct cx_config *c)
{
	const char *s = getenv("CUPTI_EXPORTER_DUTY_CYCLE");
	if (!s || !*s)
		return;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0.0 && v <= 1.0)) {
		cx_log(1, "ignoring CUPTI_EXPORTER_DUTY_CYCLE=%s: want a fraction in (0, 1]; tracing all the time", s);
		return;
	}
	c->duty_cycle = v;
}

void cx_config_load(struct cx_config *c)
{
	memset(c, 0, sizeof *c);
	log_level = get_int("CUPTI_EXPORTER_LOG", 0, 2, 1);
	c->log_level = log_level;
	strcpy(c->socket_path, "/run/cupti-exporter/activity.sock");
	get_str("CUPTI_EXPORTER_SOCKET", c->socket_path, sizeof c->socket_path);
	c->kernel = c->memcpy = c->memset = c->ptop = 1;
	get_kinds(c);
	unsigned long long bs = 4ull << 20;
	get_size("CUPTI_EXPORTER_BUFFER_SIZE", 64ull << 10, 256ull << 20, &bs);
	c->buffer_size = (size_t)(bs & ~7ull);
	c->buffer_count = get_int("CUPTI_EXPORTER_BUFFER_COUNT", 1, 1024, 16);
	unsigned long long q = 262144;
	get_size("CUPTI_EXPORTER_QUEUE_RECORDS", 1024, 16ull << 20, &q);
	c->queue_records = (size_t)q;
	c->flush_ms = get_int("CUPTI_EXPORTER_FLUSH_INTERVAL_MS", 10, 60000, 1000);
	c->quiet_after_ms = get_int("CUPTI_EXPORTER_QUIET_AFTER_MS", 100, 3600000, 1000);
	c->quiet_flush_ms = get_int("CUPTI_EXPORTER_QUIET_FLUSH_INTERVAL_MS", 0, 60000, 20);
	c->launch_watch = get_int("CUPTI_EXPORTER_LAUNCH_WATCH", 0, 1, 1);
	c->duty_cycle = 1.0;
	get_duty(c);
	c->duty_period_ms = get_int("CUPTI_EXPORTER_DUTY_PERIOD_MS", 100, 3600000, 10000);
	c->exit_timeout_ms = get_int("CUPTI_EXPORTER_EXIT_TIMEOUT_MS", 0, 10000, 1000);
	c->disabled = get_int("CUPTI_EXPORTER_DISABLE", 0, 1, 0);
	get_str("CUPTI_EXPORTER_CUPTI_LIBRARY", c->cupti_library, sizeof c->cupti_library);
	strcpy(c->cuda_library, "libcuda.so.1");
	get_str("CUPTI_EXPORTER_CUDA_LIBRARY", c->cuda_library, sizeof c->cuda_library);
	get_str("CUPTI_EXPORTER_STEP_ASIDE_ENV", c->step_aside_env, sizeof c->step_aside_env);
}

const char *cx_config_other_tool(const struct cx_config *c)
{
	static char name[128];
	char list[sizeof c->step_aside_env];
	strcpy(list, c->step_aside_env);
	for (char *save = NULL, *t = strtok_r(list, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
		if (getenv(t)) {
			snprintf(name, sizeof name, "%s", t);
			return name;
		}
	return NULL;
}
