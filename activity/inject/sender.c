/* sender.c: the sender thread. It owns the socket: connects with backoff,
 * sends hello, drains the record queue into strings + records frames, sends
 * drop counters and coverage spans, calls cuptiActivityFlushAll(0)
 * periodically and runs the duty cycle. It never blocks an application
 * thread: writes are non-blocking and only this thread waits. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject.h"

/* launch + strings + records + drops + coverage frames (at most 256 spans of 24 bytes) */
#define OUT_CAP (2 * (CX_HEADER_SIZE + CX_MAX_PAYLOAD) + 4096 + 8192)
#define MAX_WAIT_MS 100
#define REFUSED_GIVE_UP_NS (60ull * 1000000000ull) /* refused mode: stop trying after 60 s */

static pthread_t thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv; /* wakes sleeps on stop; signals done */
static int stopping, done, refused;
static uint64_t stop_ns; /* when cx_sender_finish asked the thread to stop */

static uint8_t *out;
static size_t out_len, out_off;
static uint64_t out_records, sent_records, drops_sent_total = ~0ull, drops_sent_ns;
static struct cx_record *batch;
static size_t batch_pos, batch_len;
static uint64_t popped; /* records ever taken from the queue */
static uint8_t sent_names[(CX_MAX_NAME_ID + 1) / 8];
static struct cx_conn conn;
static struct cx_hello hello;
static int have_hello, goodbye_queued;
static _Atomic uint64_t sent_total; /* sent_records, for other threads */

static uint64_t load_drops(uint64_t *d)
{
	uint64_t t = 0;
	for (int i = 0; i < CX_NUM_DROPS; i++)
		t += d[i] = atomic_load(&cx_g.drops[i]);
	return t;
}

static int is_stopping(void)
{
	pthread_mutex_lock(&mu);
	int s = stopping;
	pthread_mutex_unlock(&mu);
	return s;
}

static uint64_t stop_time(void)
{
	pthread_mutex_lock(&mu);
	uint64_t t = stop_ns;
	pthread_mutex_unlock(&mu);
	return t;
}

static void sleep_ms(int ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)ms * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&mu);
	if (!stopping)
		pthread_cond_timedwait(&cv, &mu, &ts);
	pthread_mutex_unlock(&mu);
}

static void append_drops(uint64_t now)
{
	uint64_t d[CX_NUM_DROPS], t = load_drops(d);
	out_len += cx_wire_drops(out + out_len, 0, 0, d);
	drops_sent_total = t, drops_sent_ns = now;
}

static void on_connect(uint64_t now)
{
	if (!have_hello) { /* first connection: only now touch libcuda, after cuInit returned */
		cx_proc_hello(&hello, cx_g.cupti_version, cx_g.cfg.cuda_library);
		have_hello = 1;
	}
	memset(sent_names, 0, sizeof sent_names);
	out_off = 0, out_records = 0;
	out_len = cx_wire_hello(out, OUT_CAP, &hello);
	append_drops(now);
}

/* Records taken from the queue and put into frames: a span closed behind
 * record number seq may go out once consumed() >= seq. */
static uint64_t consumed(void)
{
	return popped - (batch_len - batch_pos);
}

/* Fills the empty out buffer with the next frames; waits up to wait_ms for records. */
static void fill(uint64_t now, int wait_ms)
{
	out_off = out_len = 0, out_records = 0;
	uint64_t ts;
	uint32_t kind, cbid;
	if (cx_launch_take(&ts, &kind, &cbid)) { /* first: it is what an idle-released GPU waits for */
		out_len += cx_wire_launch(out, ts, kind, cbid);
		atomic_fetch_add(&cx_g.launch_frames, 1);
	}
	uint64_t d[CX_NUM_DROPS];
	/* Per-reason counters at most once a second while they change, even under a steady record flow. */
	if (load_drops(d) != drops_sent_total && now - drops_sent_ns >= 1000000000ull)
		append_drops(now);
	if (batch_pos == batch_len) {
		batch_pos = batch_len = 0;
		int wait = out_len || cx_coverage_ready(consumed()) ? 0 : wait_ms;
		batch_len = cx_queue_pop(batch, CX_MAX_RECORDS_PER_FRAME, wait);
		popped += batch_len;
	}
	if (batch_pos < batch_len) {
		uint8_t *sf = out + out_len; /* the strings frame goes after a drops frame, if any */
		size_t s = cx_wire_strings_begin(sf), end = batch_pos;
		uint32_t count = 0;
		for (; end < batch_len; end++) {
			uint32_t id = batch[end].name_id;
			if (!id || sent_names[id / 8] & (1u << (id % 8)))
				continue;
			uint16_t len;
			const char *name = cx_names_get(id, &len);
			if (!name) { /* cannot happen: ids are interned before queueing */
				batch[end].name_id = 0;
				continue;
			}
			size_t ns = cx_wire_strings_add(sf, s, id, name, len);
			if (ns == s)
				break; /* strings frame full: send the records so far first */
			s = ns, count++;
			sent_names[id / 8] |= (uint8_t)(1u << (id % 8));
		}
		if (count) {
			cx_wire_strings_finish(sf, s, count);
			out_len += s;
		}
		uint32_t n = (uint32_t)(end - batch_pos);
		out_len += cx_wire_records(out + out_len, load_drops(d), batch + batch_pos, n);
		out_records = n;
		batch_pos = end;
	}
	out_len += cx_coverage_append(out + out_len, consumed());
}

static void duty_step(uint64_t now, uint64_t t0, int *on)
{
	const struct cx_config *c = &cx_g.cfg;
	if (c->duty_cycle >= 1.0)
		return;
	uint64_t period = (uint64_t)c->duty_period_ms * 1000000u;
	int want = (double)((now - t0) % period) < c->duty_cycle * (double)period;
	uint64_t ts = 0;
	if (want == *on || cx_enable_kinds(want, &ts) != 0)
		return;
	*on = want;
	if (want) {
		if (ts)
			cx_coverage_open(ts);
		return;
	}
	/* The window's records come out now, so they go before the span that covers them. */
	cx_g.cupti.flush_all(0);
	if (ts)
		cx_coverage_close(ts, 0);
}

/* The periodic flush cuts the open span: T is taken before the flush, and the
 * span [open, T] is queued behind the records that flush delivers. */
static void periodic_flush(void)
{
	uint64_t t = cx_coverage_is_open() ? cx_cupti_time() : 0;
	cx_g.cupti.flush_all(0);
	if (t)
		cx_coverage_close(t, 1);
}

/* At exit the exporter has stopped reading (hung, or full): the frame that is
 * stuck and what is still queued are lost. Count them, and say so on a fresh
 * connection (the kernel queues it even if the exporter accepts later): hello,
 * the spans not sent (lossy) and goodbye with the final counters. */
static void goodbye_on_new_connection(uint64_t now)
{
	cx_count_drop(CX_DROP_QUEUE_FULL, out_records + (batch_len - batch_pos) + cx_queue_discard());
	out_records = 0, batch_pos = batch_len = 0;
	cx_conn_close(&conn, now);
	conn.next_try_ns = 0;
	if (!cx_conn_try_open(&conn, cx_g.cfg.socket_path, now))
		return;
	uint64_t d[CX_NUM_DROPS];
	load_drops(d);
	out_off = 0;
	out_len = cx_wire_hello(out, OUT_CAP, &hello);
	out_len += cx_coverage_append_all_lossy(out + out_len);
	out_len += cx_wire_drops(out + out_len, 1, sent_records, d);
	for (int i = 0; i < 20 && out_off < out_len; i++) {
		long w = cx_conn_write(&conn, out + out_off, out_len - out_off, now);
		if (w < 0)
			break;
		out_off += (size_t)w;
		if (out_off < out_len)
			cx_conn_wait_writable(&conn, 5);
	}
	if (out_off == out_len)
		cx_coverage_sent();
	cx_log(out_off == out_len ? 2 : 1, "exit: the exporter stopped reading; final counters %s on a new connection",
	       out_off == out_len ? "sent" : "could not be sent");
}

/* Quiet flush: once no record has come for quiet_after_ms, FlushAll(0) every
 * quiet_flush_ms instead of every flush_ms, so that the first kernel after a quiet
 * spell reaches the exporter within about quiet_flush_ms of its end (an exporter that
 * released an idle GPU's PM session takes it back on that record). While quiet the
 * launch watch is on (launch.c): the first API call that submits work reaches the
 * exporter within about quiet_flush_ms of the call, before the GPU has run it; a launch
 * frame counts as activity, so the watch is armed again only after another quiet spell.
 * It does not cut the coverage span (records may go before their span, never after). It
 * returns when the next quiet flush is due, or UINT64_MAX while records flow or when it is
 * off. */
static uint64_t quiet_step(uint64_t now)
{
	static uint64_t seen, last_activity, next_quick;
	const struct cx_config *c = &cx_g.cfg;
	if (!c->quiet_flush_ms || c->quiet_flush_ms >= c->flush_ms || !atomic_load(&cx_g.tracing)) {
		cx_launch_watch(0);
		return UINT64_MAX;
	}
	uint64_t s = atomic_load(&cx_g.records_seen) + atomic_load(&cx_g.launch_frames);
	if (s != seen || !last_activity) {
		seen = s;
		last_activity = now;
	}
	if (now - last_activity < (uint64_t)c->quiet_after_ms * 1000000u) {
		cx_launch_watch(0);
		return UINT64_MAX;
	}
	cx_launch_watch(c->launch_watch);
	if (now >= next_quick) {
		cx_g.cupti.flush_all(0);
		atomic_fetch_add(&cx_g.quiet_flushes, 1);
		next_quick = now + (uint64_t)c->quiet_flush_ms * 1000000u;
	}
	return next_quick;
}

/* How long the idle sender may wait for records: until the next flush or duty switch. */
static int wait_ms(uint64_t now, uint64_t next_flush)
{
	uint64_t ms = next_flush > now ? (next_flush - now) / 1000000u + 1 : 1;
	if (cx_g.cfg.duty_cycle < 1.0)
		ms = ms < 10 ? ms : 10; /* duty switches are checked every 10 ms */
	return ms < MAX_WAIT_MS ? (int)ms : MAX_WAIT_MS;
}

static void *run(void *arg)
{
	(void)arg;
	uint64_t t0 = cx_now_ns(), next_flush = t0 + (uint64_t)cx_g.cfg.flush_ms * 1000000u;
	int on = 1, last_try = 0, stopped = 0;
	uint64_t stop_deadline = 0, quiet_next = UINT64_MAX;
	if (!refused && atomic_load(&cx_g.tracing) && cx_g.trace_start)
		cx_coverage_open(cx_g.trace_start);
	for (;;) {
		uint64_t now = cx_now_ns();
		int stop = is_stopping();
		if (!refused && !stop) {
			if (now >= next_flush) {
				periodic_flush();
				next_flush = now + (uint64_t)cx_g.cfg.flush_ms * 1000000u;
			}
			quiet_next = quiet_step(now);
			duty_step(now, t0, &on);
		}
		if (stop && !stopped) { /* the last span ends where the exit flush began */
			stopped = 1;
			cx_launch_watch(0); /* no API records through the rest of the exit */
			uint64_t end = atomic_load(&cx_g.trace_end);
			if (end)
				cx_coverage_close(end, 0);
			/* half the exit timeout to drain, the rest (less this thread's waits of at most
			 * 100 ms) for the fallback goodbye */
			stop_deadline = stop_time() + (uint64_t)cx_g.cfg.exit_timeout_ms * 500000u;
		}
		if (stop && conn.fd >= 0 && out_off < out_len && now >= stop_deadline &&
		    cx_g.cfg.exit_timeout_ms > 0) {
			goodbye_on_new_connection(now);
			break;
		}
		if (conn.fd < 0) {
			if (stop && !last_try) { /* one last attempt, whatever the backoff says */
				conn.next_try_ns = 0;
				last_try = 1;
			} else if (stop || (refused && now - t0 > REFUSED_GIVE_UP_NS)) {
				break; /* what is still queued is lost with the process */
			}
			if (cx_conn_try_open(&conn, cx_g.cfg.socket_path, now))
				on_connect(now);
			else {
				uint64_t wake = conn.next_try_ns < next_flush ? conn.next_try_ns : next_flush;
				wake = quiet_next < wake ? quiet_next : wake;
				sleep_ms(wait_ms(now, wake));
				continue;
			}
		}
		if (out_off == out_len) {
			if (goodbye_queued)
				break; /* goodbye written */
			int idle = stop || refused ? 0 : wait_ms(now, quiet_next < next_flush ? quiet_next : next_flush);
			fill(now, idle);
			if (out_len == 0 && (stop || refused)) {
				uint64_t d[CX_NUM_DROPS];
				load_drops(d);
				out_len = cx_wire_drops(out, 1, sent_records, d);
				goodbye_queued = 1;
			}
			if (out_len == 0)
				continue;
		}
		long w = cx_conn_write(&conn, out + out_off, out_len - out_off, now);
		if (w < 0) { /* connection lost: the records of the unsent frame are lost */
			cx_count_drop(CX_DROP_QUEUE_FULL, out_records);
			cx_coverage_mark_lossy(); /* spans not yet written go again, lossy */
			out_off = out_len = 0, out_records = 0, goodbye_queued = 0;
			continue;
		}
		out_off += (size_t)w;
		if (out_off == out_len) {
			cx_coverage_sent();
			sent_records += out_records;
			atomic_store(&sent_total, sent_records);
			out_records = 0;
		} else if (w == 0) {
			cx_conn_wait_writable(&conn, stop ? 10 : MAX_WAIT_MS);
		}
	}
	if (conn.fd >= 0)
		cx_conn_close(&conn, cx_now_ns());
	/* Gave up (stopping without an exporter): what is left is lost, and counted. */
	cx_count_drop(CX_DROP_QUEUE_FULL, out_records + (batch_len - batch_pos) + cx_queue_discard());
	pthread_mutex_lock(&mu);
	atomic_store(&sent_total, sent_records);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	return NULL;
}

int cx_sender_start(int refused_mode)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &a);
	pthread_condattr_destroy(&a);
	refused = refused_mode;
	cx_conn_init(&conn);
	out = malloc(OUT_CAP);
	batch = malloc(CX_MAX_RECORDS_PER_FRAME * sizeof *batch);
	if (!out || !batch)
		return -1;
	/* The thread takes no signals: the application's handlers stay where they were. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&thread, NULL, run, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -1;
	pthread_detach(thread);
	return 0;
}

void cx_sender_finish(int timeout_ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&mu);
	stopping = 1;
	stop_ns = cx_now_ns();
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	cx_queue_wake();
	pthread_mutex_lock(&mu);
	while (!done && pthread_cond_timedwait(&cv, &mu, &ts) == 0)
		;
	pthread_mutex_unlock(&mu);
}

uint64_t cx_sender_sent(void)
{
	return atomic_load(&sent_total);
}
