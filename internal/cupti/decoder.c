#include "decoder.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static int64_t mono_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void cx_batch_run(cx_batch *b) {
	b->counter_info_r = b->reset_r = 0;
	b->reset_done = 0;
	b->total = b->populated = b->completed = b->n = 0;
	b->ns_decode = b->ns_sample_info = b->ns_evaluate = b->ns_reset = 0;

	int64_t t0 = mono_ns();
	cx_decode_result dr = cx_decode(b->l, b->obj, b->img, b->size);
	b->ns_decode = mono_ns() - t0;
	b->decode_r = dr.r;
	b->stop_reason = dr.stop_reason;
	b->overflow = dr.overflow;
	if (b->decode_r != 0 || b->overflow)
		return;

	cx_counter_data_info_result ir = cx_counter_data_info(b->l, b->img, b->size);
	if ((b->counter_info_r = ir.r) != 0)
		return;
	b->total = ir.total;
	b->populated = ir.populated;
	b->completed = ir.completed;
	b->n = b->completed < b->cap ? b->completed : b->cap;

	for (size_t i = 0; i < b->n; i++) {
		int64_t ts = mono_ns();
		cx_sample_info_result si = cx_sample_info(b->l, b->obj, b->img, b->size, i);
		int64_t te = mono_ns();
		b->ns_sample_info += te - ts;
		b->info_r[i] = si.r;
		b->start[i] = si.start;
		b->end[i] = si.end;
		b->eval_r[i] = 0;
		if (si.r != 0 || (i == 0 && b->skip_first))
			continue;
		b->eval_r[i] = cx_evaluate(b->l, b->host, b->img, b->size, i, b->names, b->nmetrics,
					   b->values + i * b->nmetrics);
		b->ns_evaluate += mono_ns() - te;
	}
	if (b->stop_reason == 1) /* CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL: replaced, not reset */
		return;
	int64_t tr = mono_ns();
	b->reset_r = cx_counter_data_init(b->l, b->obj, b->img, b->size);
	b->ns_reset = mono_ns() - tr;
	b->reset_done = b->reset_r == 0;
}

static void *decoder_main(void *arg) {
	cx_decoder *d = arg;
	for (;;) {
		uint64_t v;
		ssize_t r = read(d->go_fd, &v, sizeof v);
		if (r != (ssize_t)sizeof v) {
			if (r < 0 && errno == EINTR)
				continue;
			return NULL; /* go_fd closed under it: nothing more will come */
		}
		if (__atomic_load_n(&d->quit, __ATOMIC_ACQUIRE))
			return NULL;
		cx_batch_run(d->job);
		v = 1;
		while (write(d->done_fd, &v, sizeof v) < 0 && errno == EINTR) {
		}
	}
}

int cx_decoder_start(cx_decoder *d) {
	d->quit = 0;
	d->job = NULL;
	if ((d->go_fd = eventfd(0, EFD_CLOEXEC)) < 0)
		return errno;
	if ((d->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		int e = errno;
		close(d->go_fd);
		return e;
	}
	int e = pthread_create(&d->thread, NULL, decoder_main, d);
	if (e != 0) {
		close(d->go_fd);
		close(d->done_fd);
	}
	return e;
}

int64_t cx_decoder_cpu_ns(cx_decoder *d) {
	clockid_t c;
	struct timespec t;
	if (pthread_getcpuclockid(d->thread, &c) != 0 || clock_gettime(c, &t) != 0)
		return -1;
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void cx_decoder_stop(cx_decoder *d) {
	__atomic_store_n(&d->quit, 1, __ATOMIC_RELEASE);
	uint64_t v = 1;
	while (write(d->go_fd, &v, sizeof v) < 0 && errno == EINTR) {
	}
	pthread_join(d->thread, NULL);
	close(d->go_fd);
}
