#ifndef CX_DECODER_H
#define CX_DECODER_H

#include <pthread.h>
#include <stdint.h>

#include "loader.h"

/* cx_batch is one decode's CUPTI work: cuptiPmSamplingDecodeData into an image, the image's
 * counter data info, each completed sample's times and values, and the image's
 * re-initialisation (not after a decode that stopped full, whose image the caller replaces).
 * The caller fills the inputs and the arrays (C memory, cap samples); cx_batch_run fills the
 * rest. Times are CLOCK_MONOTONIC nanoseconds around each call, as the Go path's timers. */
typedef struct cx_batch {
	/* inputs */
	cx_lib *l;
	CUpti_PmSampling_Object *obj;
	CUpti_Profiler_Host_Object *host;
	uint8_t *img;
	size_t size;
	const char **names;
	size_t nmetrics;
	int skip_first; /* the first sample is the rest of one split by the previous reset: not evaluated */
	size_t cap;     /* samples the arrays hold */
	uint64_t *start, *end;
	double *values;         /* nmetrics a sample */
	CUptiResult *info_r;    /* each sample's cuptiPmSamplingCounterDataGetSampleInfo */
	CUptiResult *eval_r;    /* each sample's evaluation (0 where skipped) */
	/* outputs */
	CUptiResult decode_r, counter_info_r, reset_r;
	int stop_reason, overflow, reset_done;
	size_t total, populated, completed, n; /* n: samples in the arrays, min(completed, cap) */
	int64_t ns_decode, ns_sample_info, ns_evaluate, ns_reset;
} cx_batch;

void cx_batch_run(cx_batch *b);

/* cx_decoder is a thread that runs batches: the caller posts one (cx_decoder.job, then 8 bytes
 * to go_fd) and reads done_fd (an eventfd, non-blocking) when it is done. A Go caller waits for
 * done_fd in its netpoller, so no goroutine sits in a cgo call while CUPTI decodes: the Go
 * runtime's monitor then sleeps instead of polling every 20 us (docs/performance.md). */
typedef struct cx_decoder {
	pthread_t thread;
	int go_fd, done_fd;
	cx_batch *job;
	int quit;
} cx_decoder;

/* cx_decoder_start creates the eventfds and the thread; 0, or an errno value. The thread takes
 * the calling thread's nice value (Linux: a new thread inherits it), so a caller that raised its
 * own priority (pmsample's sampling thread) starts it raised. */
int cx_decoder_start(cx_decoder *d);
/* cx_decoder_cpu_ns is the thread's CPU time (user and system) in ns, or -1. */
int64_t cx_decoder_cpu_ns(cx_decoder *d);
/* cx_decoder_stop ends the thread (after the batch it runs, if any) and closes go_fd; done_fd
 * belongs to the caller from start on. */
void cx_decoder_stop(cx_decoder *d);

#endif
