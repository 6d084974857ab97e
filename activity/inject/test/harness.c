/* Test harness for the injection library: dlopens it (and, through it, the
 * fake libcupti), calls InitializeInjection, drives buffer requests and
 * completions from several threads, and checks what a receiving socket gets.
 * Usage: harness MODE (see run.sh). Exits 0 when every check passed. */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fake_cupti.h"

#define NDROPS 6
enum { POOL, QUEUE, CUPTI, VERSION, UNKNOWN, NAMES };

static int failures;
#define CHECK(cond, ...)                                                                                            \
	do {                                                                                                       \
		if (!(cond)) {                                                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                            \
			fprintf(stderr, __VA_ARGS__);                                                              \
			fprintf(stderr, "\n");                                                                     \
			failures++;                                                                                \
		}                                                                                                  \
	} while (0)

static struct fake_api *fake;
static int (*initialize)(void);
static void (*finish)(void);

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- receiver: accepts connections and checks every frame ---- */
static struct {
	pthread_mutex_t mu;
	int listen_fd, stop;
	pthread_t thread;
	int connections, hellos, goodbyes, bad_frames, hold;
	uint32_t pid;
	int ndevices;
	char uuid1[64];
	uint64_t records, per_kind[4], ptop, mismatches, drops[NDROPS], last_frame_drop_total, goodbye_sent;
	char *names[1024];
	int nspans, lossy_spans, bad_spans;
	uint64_t span[8192][2], span_records[8192]; /* span, records received before it */
	unsigned launches;
	uint64_t launch_ts;
	uint32_t launch_kind, launch_cbid;
} rx = {.mu = PTHREAD_MUTEX_INITIALIZER, .listen_fd = -1};

static uint16_t g16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t g32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t g64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static int read_full(int fd, uint8_t *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r <= 0)
			return -1;
		p += r, n -= (size_t)r;
	}
	return 0;
}

static void check_record(const uint8_t *r)
{
	uint64_t start = g64(r + 16), g = (start - 1) / 1000;
	static const int wire_kind[3] = {1, 2, 3};
	int ok = r[0] == wire_kind[fake_kind(g)] && start == fake_start(g) && g64(r + 24) == fake_duration(g) &&
		 g32(r + 8) == fake_device(g) && g32(r + 12) == fake_stream(g) && g64(r + 32) == fake_bytes(g) &&
		 r[1] == fake_copy_kind(g) && g32(r + 44) == fake_src_device(g);
	if (fake_kind(g) == 0) {
		uint32_t id = g32(r + 40);
		char want[16];
		snprintf(want, sizeof want, "kernel_%d", (int)(g % 5));
		ok = ok && id > 0 && id < 1024 && rx.names[id] && !strcmp(rx.names[id], want);
	} else if (fake_ptop(g)) {
		ok = ok && r[2] == 3 && r[3] == 3 && g32(r + 40) == 0;
		rx.ptop++;
	} else if (fake_kind(g) == 1) {
		ok = ok && r[2] == 1 && r[3] == 3 && g32(r + 40) == 0;
	} else {
		ok = ok && r[4] == 3;
	}
	if (!ok)
		rx.mismatches++;
	if (r[0] <= 3)
		rx.per_kind[r[0]]++;
}

static void read_drops(const uint8_t *p, uint32_t len)
{
	if (len < 4 || g16(p) < NDROPS || len < 4 + 8u * g16(p)) {
		rx.bad_frames++;
		return;
	}
	for (int i = 0; i < NDROPS; i++)
		rx.drops[i] = g64(p + 4 + 8 * i);
}

static void handle(int fd)
{
	static uint8_t payload[(1 << 20) + 16];
	uint8_t h[12];
	while (read_full(fd, h, 12) == 0) {
		uint32_t len = g32(h + 8);
		if (g32(h) != 0x57415843u || h[4] != 3 || len > (1u << 20) || read_full(fd, payload, len)) {
			pthread_mutex_lock(&rx.mu);
			rx.bad_frames++;
			pthread_mutex_unlock(&rx.mu);
			return;
		}
		pthread_mutex_lock(&rx.mu);
		const uint8_t *p = payload;
		switch (h[5]) {
		case 1: { /* hello */
			rx.hellos++;
			rx.pid = g32(p);
			const uint8_t *q = p + 20;
			for (int i = 0; i < 5; i++)
				q += 2 + g16(q);
			rx.ndevices = g16(q);
			q += 2;
			for (int i = 0; i < rx.ndevices && i < 2; i++) {
				uint16_t n = g16(q);
				if (i == 1 && n < sizeof rx.uuid1)
					memcpy(rx.uuid1, q + 2, n), rx.uuid1[n] = 0;
				q += 2 + n;
			}
			break;
		}
		case 2: { /* strings */
			uint32_t n = g32(p);
			const uint8_t *q = p + 4;
			for (uint32_t i = 0; i < n; i++) {
				uint32_t id = g32(q);
				uint16_t l = g16(q + 4);
				if (id < 1024 && !rx.names[id])
					rx.names[id] = strndup((const char *)q + 6, l);
				else
					rx.bad_frames++; /* redefined or out of our test range */
				q += 6 + l;
			}
			break;
		}
		case 3: { /* records */
			uint32_t n = g32(p + 8), size = g16(p + 12);
			rx.last_frame_drop_total = g64(p);
			if (size != 48 || len != 16 + n * size)
				rx.bad_frames++;
			else
				for (uint32_t i = 0; i < n; i++)
					check_record(p + 16 + 48 * i);
			rx.records += n;
			break;
		}
		case 4:
			read_drops(p, len);
			break;
		case 6: { /* coverage: spans in time order, across connections too */
			uint32_t n = g32(p);
			if (len != 8 + 24 * n || g32(p + 4)) {
				rx.bad_frames++;
				break;
			}
			for (uint32_t i = 0; i < n; i++) {
				const uint8_t *q = p + 8 + 24 * i;
				uint64_t a = g64(q), b = g64(q + 8);
				uint64_t prev = rx.nspans ? rx.span[rx.nspans - 1][1] : 0;
				if (b <= a || a < prev || (g32(q + 16) & ~1u) || g32(q + 20))
					rx.bad_spans++;
				if (g32(q + 16) & 1)
					rx.lossy_spans++;
				if (rx.nspans < 8192) {
					rx.span[rx.nspans][0] = a, rx.span[rx.nspans][1] = b;
					rx.span_records[rx.nspans++] = rx.records;
				}
			}
			break;
		}
		case 7: /* launch */
			if (len != 16) {
				rx.bad_frames++;
				break;
			}
			rx.launches++;
			rx.launch_ts = g64(p), rx.launch_kind = g32(p + 8), rx.launch_cbid = g32(p + 12);
			break;
		case 5:
			rx.goodbyes++;
			rx.goodbye_sent = g64(p);
			read_drops(p + 8, len - 8);
			break;
		default:
			rx.bad_frames++;
		}
		pthread_mutex_unlock(&rx.mu);
	}
}

static void *rx_run(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&rx.mu);
		int stop = rx.stop, hold = rx.hold;
		pthread_mutex_unlock(&rx.mu);
		if (stop)
			return NULL;
		if (hold) { /* a hung exporter: connections wait in the backlog */
			msleep(10);
			continue;
		}
		struct pollfd pfd = {.fd = rx.listen_fd, .events = POLLIN};
		if (poll(&pfd, 1, 20) <= 0)
			continue;
		int fd = accept(rx.listen_fd, NULL, NULL);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&rx.mu);
		rx.connections++;
		for (int i = 1; i < 1024; i++) /* string ids are per connection */
			free(rx.names[i]), rx.names[i] = NULL;
		pthread_mutex_unlock(&rx.mu);
		handle(fd);
		close(fd);
	}
}

static void rx_start(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
	unlink(path);
	rx.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (rx.listen_fd < 0 || bind(rx.listen_fd, (struct sockaddr *)&sa, sizeof sa) || listen(rx.listen_fd, 8)) {
		perror("receiver");
		exit(2);
	}
	pthread_create(&rx.thread, NULL, rx_run, NULL);
}

static void rx_stop(void)
{
	pthread_mutex_lock(&rx.mu);
	rx.stop = 1;
	pthread_mutex_unlock(&rx.mu);
	pthread_join(rx.thread, NULL);
}

/* Waits until the receiver saw a goodbye (or timeout). */
static void rx_wait_goodbye(int ms)
{
	for (int t = 0; t < ms; t += 10) {
		pthread_mutex_lock(&rx.mu);
		int g = rx.goodbyes;
		pthread_mutex_unlock(&rx.mu);
		if (g)
			return;
		msleep(10);
	}
}

/* Checks the spans: well formed, and (contiguous) each starts where the previous ended. */
static void check_spans(int contiguous)
{
	CHECK(rx.bad_spans == 0, "%d spans empty, out of order or with reserved bits", rx.bad_spans);
	for (int i = 1; contiguous && i < rx.nspans; i++)
		CHECK(rx.span[i][0] == rx.span[i - 1][1], "span %d starts at %llu, previous ended at %llu", i,
		      (unsigned long long)rx.span[i][0], (unsigned long long)rx.span[i - 1][1]);
}

static uint64_t span_total(void)
{
	uint64_t t = 0;
	for (int i = 0; i < rx.nspans; i++)
		t += rx.span[i][1] - rx.span[i][0];
	return t;
}

/* ---- drivers ---- */
struct job {
	int thread, rounds, per_buffer;
};

static void *drive(void *arg)
{
	struct job *j = arg;
	for (int r = 0; r < j->rounds; r++) {
		uint8_t *buf;
		size_t size;
		if (!fake->request(&buf, &size)) {
			msleep(1);
			r--;
			continue; /* pool empty for a moment: CUPTI would retry later */
		}
		uint64_t first = (uint64_t)j->thread * 1000000 + (uint64_t)r * 1000;
		fake->complete(buf, fake->fill(buf, size, first, j->per_buffer));
	}
	return NULL;
}

static void run_threads(int n, int rounds, int per_buffer)
{
	pthread_t t[64];
	struct job jobs[64];
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct job){i, rounds, per_buffer};
		pthread_create(&t[i], NULL, drive, &jobs[i]);
	}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

static void load(void)
{
	const char *lib = getenv("INJECT_LIB"), *fake_lib = getenv("CUPTI_EXPORTER_CUPTI_LIBRARY");
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	void *f = dlopen(fake_lib, RTLD_NOW | RTLD_LOCAL);
	if (!h || !f) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		exit(2);
	}
	initialize = (int (*)(void))dlsym(h, "InitializeInjection");
	finish = (void (*)(void))dlsym(h, "CuptiExporterFinish");
	fake = dlsym(f, "fake_cupti_api");
	if (!initialize || !finish || !fake) {
		fprintf(stderr, "dlsym: missing symbols\n");
		exit(2);
	}
}

static const char *sock(void) { return getenv("CUPTI_EXPORTER_SOCKET"); }

static void mode_basic(void)
{
	rx_start(sock());
	uint64_t t_init = fake->now();
	CHECK(initialize() == 1, "InitializeInjection");
	uint64_t t_inited = fake->now();
	CHECK(initialize() == 1, "second call is a no-op");
	CHECK(fake->registered() && fake->enabled(10) && fake->enabled(1) && fake->enabled(2) && fake->enabled(22),
	      "kinds enabled");
	run_threads(8, 20, 50); /* 8,000 records from 8 application threads */
	uint8_t *buf;
	size_t size;
	CHECK(fake->request(&buf, &size), "request");
	fake->set_dropped(5);
	fake->complete(buf, fake->fill_other(buf, size));
	for (int t = 0; t < 3000 && fake->flush_calls(0) < 2; t += 10)
		msleep(10); /* flush interval is 20 ms; the deadline only matters on a loaded machine */
	CHECK(fake->flush_calls(0) >= 2, "periodic FlushAll(0): %d calls", fake->flush_calls(0));
	uint64_t t_finish = fake->now();
	finish();
	uint64_t t_finished = fake->now();
	finish(); /* idempotent */
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(fake->flush_calls(1) == 1, "one forced flush at finish: %d", fake->flush_calls(1));
	CHECK(rx.connections == 1 && rx.hellos == 1 && rx.goodbyes == 1, "conn %d hello %d goodbye %d", rx.connections,
	      rx.hellos, rx.goodbyes);
	CHECK(rx.pid == (uint32_t)getpid(), "hello pid %u", rx.pid);
	CHECK(rx.ndevices == 2 && !strcmp(rx.uuid1, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"), "devices %d %s",
	      rx.ndevices, rx.uuid1);
	CHECK(rx.records == 8000 && rx.mismatches == 0 && rx.bad_frames == 0, "records %llu mismatches %llu bad %d",
	      (unsigned long long)rx.records, (unsigned long long)rx.mismatches, rx.bad_frames);
	CHECK(rx.per_kind[1] + rx.per_kind[2] + rx.per_kind[3] == 8000 && rx.per_kind[1] > 2600, "kinds %llu/%llu/%llu",
	      (unsigned long long)rx.per_kind[1], (unsigned long long)rx.per_kind[2], (unsigned long long)rx.per_kind[3]);
	CHECK(rx.ptop > 400, "PtoP copies %llu, want about 533", (unsigned long long)rx.ptop);
	CHECK(rx.goodbye_sent == 8000, "goodbye sent %llu", (unsigned long long)rx.goodbye_sent);
	CHECK(rx.drops[UNKNOWN] == 1 && rx.drops[CUPTI] == 5 && rx.drops[QUEUE] == 0 && rx.drops[POOL] == 0,
	      "drops unknown %llu cupti %llu queue %llu pool %llu", (unsigned long long)rx.drops[UNKNOWN],
	      (unsigned long long)rx.drops[CUPTI], (unsigned long long)rx.drops[QUEUE], (unsigned long long)rx.drops[POOL]);
	/* Coverage: continuous tracing is one span cut at every flush, from init to finish. */
	CHECK(rx.nspans >= 2, "%d coverage spans, want one per flush (>= 2)", rx.nspans);
	check_spans(1);
	if (rx.nspans) {
		CHECK(rx.span[0][0] >= t_init && rx.span[0][0] <= t_inited, "first span starts at %llu, init ran %llu..%llu",
		      (unsigned long long)rx.span[0][0], (unsigned long long)t_init, (unsigned long long)t_inited);
		uint64_t end = rx.span[rx.nspans - 1][1];
		CHECK(end >= t_finish && end <= t_finished, "last span ends at %llu, finish ran %llu..%llu",
		      (unsigned long long)end, (unsigned long long)t_finish, (unsigned long long)t_finished);
		CHECK(rx.span_records[rx.nspans - 1] == 8000, "the last span came after %llu records, want all 8000",
		      (unsigned long long)rx.span_records[rx.nspans - 1]);
	}
	CHECK(rx.lossy_spans >= 1 && rx.lossy_spans < rx.nspans, "%d of %d spans lossy, want the one with CUPTI's 5 drops",
	      rx.lossy_spans, rx.nspans);
}

static void mode_pool(int may_refuse)
{
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection");
	uint8_t *b[6];
	size_t size;
	int got = 0;
	for (int i = 0; i < 6; i++)
		got += fake->request(&b[i], &size);
	CHECK(got == (may_refuse ? 4 : 6), "got %d buffers of a pool of 4 (refusal %s)", got,
	      may_refuse ? "allowed" : "unsafe below 13.0");
	fake->complete(b[0], 0);
	CHECK(fake->request(&b[0], &size), "a returned buffer is reused");
	for (int i = 0; i < got; i++)
		fake->complete(b[i], 0);
	finish();
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(rx.goodbyes == 1 && rx.drops[POOL] == (may_refuse ? 2u : 0u), "pool drops %llu",
	      (unsigned long long)rx.drops[POOL]);
}

static void mode_absent(void)
{
	uint64_t t_init = fake->now();
	CHECK(initialize() == 1, "InitializeInjection");
	run_threads(3, 1, 1000); /* 3,000 records, queue bound 1,024, nobody listening */
	msleep(300);
	uint64_t t_rx = fake->now();
	rx_start(sock()); /* the exporter appears: the library reconnects by itself */
	for (int t = 0; t < 5000; t += 20) {
		pthread_mutex_lock(&rx.mu);
		uint64_t n = rx.records;
		pthread_mutex_unlock(&rx.mu);
		if (n >= 1024)
			break;
		msleep(20);
	}
	finish();
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(rx.connections == 1 && rx.records == 1024 && rx.mismatches == 0, "conn %d records %llu",
	      rx.connections, (unsigned long long)rx.records);
	CHECK(rx.drops[QUEUE] == 3000 - 1024 && rx.goodbye_sent == 1024, "queue_full %llu sent %llu",
	      (unsigned long long)rx.drops[QUEUE], (unsigned long long)rx.goodbye_sent);
	CHECK(rx.last_frame_drop_total == 3000 - 1024, "records frames carry the drop total: %llu",
	      (unsigned long long)rx.last_frame_drop_total);
	/* The spans of the time without an exporter were kept and sent after hello; the one
	 * whose records overflowed the queue is lossy, the later ones are not. */
	check_spans(1);
	CHECK(rx.nspans >= 2 && rx.span[0][0] >= t_init && rx.span[0][0] < t_rx, "%d spans, first at %llu (init %llu, exporter %llu)",
	      rx.nspans, (unsigned long long)(rx.nspans ? rx.span[0][0] : 0), (unsigned long long)t_init, (unsigned long long)t_rx);
	CHECK(rx.lossy_spans >= 1 && rx.lossy_spans < rx.nspans, "%d of %d spans lossy", rx.lossy_spans, rx.nspans);
}

/* hung: the exporter accepts nothing and reads nothing (stopped) while the workload floods
 * and exits. The frame stuck in the socket and the queue are lost; the final counters and
 * the unsent spans go on a fresh connection, so what the exporter reads adds up. */
static void flood(void)
{
	for (int i = 0; i < 40; i++) { /* 20,000 records (960 KB) at a pace the sender keeps up with until */
		run_threads(1, 5, 100); /* the socket buffer is full; then the queue (1,024) overflows */
		msleep(5);
	}
	msleep(100);
}

static void mode_hung(void)
{
	rx.hold = 1;
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection");
	flood();
	finish(); /* gives up on the stuck connection after half of EXIT_TIMEOUT_MS */
	pthread_mutex_lock(&rx.mu);
	rx.hold = 0; /* the exporter resumes: it reads the first connection, then the second */
	pthread_mutex_unlock(&rx.mu);
	rx_wait_goodbye(3000);
	msleep(50);
	rx_stop();
	/* Two connections: the stuck one and the final one. On a machine too loaded for the sender
	 * to ever fill the socket buffer there is one, ended by a normal goodbye; the sums below
	 * must hold either way. */
	if (rx.connections != 2)
		fprintf(stderr, "hung: the sender never got stuck (%d connection); the fallback was not exercised\n",
			rx.connections);
	CHECK(rx.connections >= 1 && rx.connections <= 2 && rx.hellos == rx.connections && rx.goodbyes == 1,
	      "conn %d hello %d goodbye %d", rx.connections, rx.hellos, rx.goodbyes);
	CHECK(rx.drops[QUEUE] > 0 && rx.records + rx.drops[QUEUE] == 20000 && rx.goodbye_sent == rx.records,
	      "records %llu + queue_full %llu != 20000 (sent %llu)", (unsigned long long)rx.records,
	      (unsigned long long)rx.drops[QUEUE], (unsigned long long)rx.goodbye_sent);
	CHECK(rx.mismatches == 0 && rx.bad_frames <= 1, "mismatches %llu bad frames %d (one cut frame allowed)",
	      (unsigned long long)rx.mismatches, rx.bad_frames);
	check_spans(1);
	CHECK(rx.nspans >= 1 && rx.lossy_spans >= 1, "%d spans, %d lossy", rx.nspans, rx.lossy_spans);
}

static void mode_fork(void)
{
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection");
	run_threads(2, 5, 10);
	for (int i = 0; i < 3; i++) {
		uint8_t *buf;
		size_t size;
		CHECK(fake->request(&buf, &size), "request");
		size_t valid = fake->fill(buf, size, 50000000 + (uint64_t)i * 10, 10);
		pid_t pid = fork();
		if (pid == 0) {
			/* The child: callbacks must not call CUPTI; exit runs the atexit handler. */
			fake->complete(buf, valid);
			uint8_t *b2;
			fake->request(&b2, &size);
			if (i == 2)
				initialize(); /* a child calling again stays a no-op */
			exit(0);
		}
		int status;
		waitpid(pid, &status, 0);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d status %#x", i, status);
		fake->complete(buf, 0); /* the parent's copy goes back to the pool */
	}
	finish();
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(rx.connections == 1 && rx.records == 100 && rx.goodbyes == 1, "conn %d records %llu goodbye %d",
	      rx.connections, (unsigned long long)rx.records, rx.goodbyes);
	const char *v = getenv("FAKE_CUPTI_VIOLATIONS");
	FILE *f = fopen(v, "r");
	char line[256] = "";
	if (f) {
		if (!fgets(line, sizeof line, f))
			line[0] = 0;
		fclose(f);
	}
	CHECK(line[0] == 0, "a forked child called CUPTI: %s", line);
}

static void mode_step_aside(void)
{
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection returns 1 when stepping aside");
	msleep(300);
	rx_stop();
	CHECK(!fake->enabled(10) && !fake->enabled(1) && !fake->enabled(2) && !fake->enabled(22), "no kind left enabled");
	CHECK(rx.connections == 0, "no connection when not tracing: %d", rx.connections);
}

static void mode_version(void)
{
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection returns 1 on an unknown version");
	CHECK(!fake->registered() && fake->enable_calls() == 0, "no callbacks, no kinds");
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(rx.hellos == 1 && rx.goodbyes == 1 && rx.drops[VERSION] == 1 && rx.records == 0,
	      "hello %d goodbye %d version_refused %llu", rx.hellos, rx.goodbyes, (unsigned long long)rx.drops[VERSION]);
}

static void mode_duty(void)
{
	rx_start(sock());
	uint64_t t_init = fake->now();
	CHECK(initialize() == 1, "InitializeInjection");
	/* period 100 ms, 30 % on: a switch every 30 or 70 ms; wait for 4 of each (4 kinds per switch) */
	for (int t = 0; t < 5000 && (fake->enable_calls() < 16 || fake->disable_calls() < 16); t += 10)
		msleep(10);
	int en = fake->enable_calls(), dis = fake->disable_calls();
	CHECK(en >= 4 * 4 && dis >= 4 * 4, "enable calls %d disable calls %d (4 kinds)", en, dis);
	int on = 0, n = 0;
	for (; n < 200; n++, msleep(5)) /* about 1 s of samples */
		on += fake->enabled(10);
	CHECK(on > n / 10 && on < n * 6 / 10, "traced %d of %d samples, want about 30%%", on, n);
	finish();
	uint64_t t_end = fake->now();
	rx_wait_goodbye(2000);
	rx_stop();
	/* Every span lies inside a window in which the kinds were enabled, none is lossy,
	 * and together they cover about 30 % of the run. */
	static uint64_t w[4096][2];
	int nw = fake->windows(w, 4096);
	check_spans(0);
	CHECK(rx.nspans >= 4, "%d coverage spans over >= 4 duty windows", rx.nspans);
	for (int i = 0; i < rx.nspans; i++) {
		int inside = 0;
		for (int j = 0; j < nw && !inside; j++)
			inside = w[j][0] <= rx.span[i][0] && rx.span[i][1] <= (w[j][1] ? w[j][1] : t_end);
		CHECK(inside, "span %d [%llu, %llu] is not inside an enabled window", i, (unsigned long long)rx.span[i][0],
		      (unsigned long long)rx.span[i][1]);
	}
	double share = (double)span_total() / (double)(t_end - t_init);
	CHECK(share > 0.15 && share < 0.45, "spans cover %.2f of the run, want about 0.3", share);
	CHECK(rx.lossy_spans == 0, "%d lossy spans without drops", rx.lossy_spans);
}

/* flushes_during: FlushAll(0) calls while records come every 20 ms (records) or none
 * come (quiet), for ms. */
static int flushes_during(int ms, int records)
{
	int f0 = fake->flush_calls(0);
	for (int t = 0; t < ms; t += 20) {
		if (records)
			run_threads(1, 1, 10);
		msleep(20);
	}
	return fake->flush_calls(0) - f0;
}

/* quiet: with FLUSH_INTERVAL_MS=1000, QUIET_AFTER_MS=200 and QUIET_FLUSH_INTERVAL_MS=10,
 * FlushAll(0) runs about every 10 ms once no record came for 200 ms, and only at the
 * 1 s period while records flow; the quiet flushes do not cut the coverage span. */
static void mode_quiet(void)
{
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection");
	int busy = flushes_during(600, 1);
	CHECK(busy <= 1, "%d flushes in 600 ms of records, want the 1 s period only", busy);
	int quiet = flushes_during(800, 0); /* 200 ms to turn quiet, then 600 ms at 10 ms */
	CHECK(quiet >= 20, "%d flushes in 800 ms without records, want about 60", quiet);
	run_threads(1, 1, 10); /* work again: the first record ends the quiet flush */
	msleep(60);
	int again = flushes_during(600, 1);
	CHECK(again <= 1, "%d flushes in 600 ms of records after the quiet spell", again);
	finish();
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(rx.records == 10u * (1 + 2 * 30), "records %llu, want %u", (unsigned long long)rx.records, 10u * (1 + 2 * 30));
	CHECK(rx.nspans <= 4, "%d coverage spans in 2 s at a 1 s flush period: the quiet flush cut spans", rx.nspans);
	check_spans(1);
}

/* api_record: completes one buffer holding one API record (kind 4 or 5). */
static void api_record(uint32_t kind, uint32_t cbid, uint64_t start)
{
	uint8_t *buf;
	size_t size;
	while (!fake->request(&buf, &size))
		msleep(1);
	fake->complete(buf, fake->fill_api(buf, size, kind, cbid, start));
}

static int watching(void) { return fake->enabled(4) && fake->enabled(5); }

static unsigned launches(void)
{
	pthread_mutex_lock(&rx.mu);
	unsigned n = rx.launches;
	pthread_mutex_unlock(&rx.mu);
	return n;
}

/* launch: with QUIET_AFTER_MS=200 and QUIET_FLUSH_INTERVAL_MS=10 the driver and runtime API
 * kinds are on only while quiet; the first call that submits work (runtime
 * cudaLaunchKernel, cbid 211) becomes one launch frame with its start, and turns them off
 * until the next quiet spell; other calls (cudaGetDevice, cbid 17) and API records that come
 * after it send nothing, and no API record counts as a record or as unknown. With
 * CUPTI_EXPORTER_LAUNCH_WATCH=0 the kinds stay off. */
static void mode_launch(void)
{
	const char *w = getenv("CUPTI_EXPORTER_LAUNCH_WATCH");
	int on = !w || strcmp(w, "0") != 0;
	rx_start(sock());
	CHECK(initialize() == 1, "InitializeInjection");
	run_threads(1, 1, 10);
	msleep(50);
	CHECK(!fake->enabled(4) && !fake->enabled(5), "API kinds on while records flow");
	msleep(300);
	CHECK(watching() == on, "API kinds %d/%d after 300 ms quiet, want %d", fake->enabled(4), fake->enabled(5), on);
	if (on) {
		api_record(5, 17, 111); /* cudaGetDevice: no work */
		msleep(60);
		CHECK(launches() == 0 && watching(), "a call that submits no work: %u launch frames, watching %d", launches(), watching());
		uint64_t t = fake->now();
		api_record(5, 211, t); /* cudaLaunchKernel */
		msleep(60);
		api_record(4, 307, t + 5); /* cuLaunchKernel after it: the watch is off */
		msleep(60);
		CHECK(launches() == 1, "%u launch frames, want 1", launches());
		CHECK(rx.launch_ts == t && rx.launch_kind == 5 && rx.launch_cbid == 211, "launch %llu kind %u cbid %u, want %llu 5 211",
		      (unsigned long long)rx.launch_ts, rx.launch_kind, rx.launch_cbid, (unsigned long long)t);
		CHECK(!fake->enabled(4) && !fake->enabled(5), "API kinds still on after the launch frame");
		msleep(300); /* the launch frame counts as activity: quiet again after 200 ms */
		CHECK(watching(), "the watch was not armed again after the next quiet spell");
	} else {
		run_threads(1, 1, 10);
	}
	finish(); /* watching, when on: the exit turns the watch off */
	rx_wait_goodbye(2000);
	rx_stop();
	CHECK(!fake->enabled(4) && !fake->enabled(5), "API kinds left on at exit");
	unsigned want = on ? 10 : 20;
	CHECK(rx.records == want, "records %llu, want %u (API records are not records)", (unsigned long long)rx.records, want);
	CHECK(rx.drops[4] == 0, "unknown_record %llu: API records counted as unknown", (unsigned long long)rx.drops[4]);
	CHECK(rx.bad_frames == 0, "%d bad frames", rx.bad_frames);
}

/* kinds: CUPTI_EXPORTER_KINDS=memcpy,ptop enables exactly MEMCPY and MEMCPY2. */
static void mode_kinds(void)
{
	CHECK(initialize() == 1, "InitializeInjection");
	CHECK(fake->enabled(1) && fake->enabled(22) && !fake->enabled(10) && !fake->enabled(2),
	      "kinds kernel %d memcpy %d memset %d ptop %d", fake->enabled(10), fake->enabled(1), fake->enabled(2),
	      fake->enabled(22));
	finish();
}

/* absent-exit: nobody ever listens; run.sh checks the exit line counts the 100 records as lost. */
static void mode_absent_exit(void)
{
	CHECK(initialize() == 1, "InitializeInjection");
	run_threads(1, 1, 100);
	finish();
}

/* flood: as hung, but the Go integration test plays the exporter. */
static void mode_flood(void)
{
	CHECK(initialize() == 1, "InitializeInjection");
	flood();
	finish();
}

/* drive: the Go integration test listens; we only send. */
static void mode_drive(void)
{
	CHECK(initialize() == 1, "InitializeInjection");
	run_threads(4, 5, 30);
	finish();
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: harness basic|pool|pool-old|absent|hung|absent-exit|fork|step-aside|version|duty|kinds|quiet|launch|drive|flood\n");
		return 2;
	}
	load();
	const char *m = argv[1];
	if (!strcmp(m, "basic"))
		mode_basic();
	else if (!strcmp(m, "pool"))
		mode_pool(1);
	else if (!strcmp(m, "pool-old"))
		mode_pool(0);
	else if (!strcmp(m, "absent"))
		mode_absent();
	else if (!strcmp(m, "hung"))
		mode_hung();
	else if (!strcmp(m, "absent-exit"))
		mode_absent_exit();
	else if (!strcmp(m, "fork"))
		mode_fork();
	else if (!strcmp(m, "step-aside"))
		mode_step_aside();
	else if (!strcmp(m, "version"))
		mode_version();
	else if (!strcmp(m, "duty"))
		mode_duty();
	else if (!strcmp(m, "kinds"))
		mode_kinds();
	else if (!strcmp(m, "quiet"))
		mode_quiet();
	else if (!strcmp(m, "launch"))
		mode_launch();
	else if (!strcmp(m, "flood"))
		mode_flood();
	else if (!strcmp(m, "drive"))
		mode_drive();
	else {
		fprintf(stderr, "unknown mode %s\n", m);
		return 2;
	}
	if (failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", m, failures);
		return 1;
	}
	printf("ok %s\n", m);
	return 0;
}
