/* Internal declarations shared by the files of the injection library.
 * Wire format: docs/wire-format.md. CUPTI ABI: our own declarations of the
 * few types and functions used (no NVIDIA headers), per shared REFERENCE §3. */
#ifndef CX_INJECT_H
#define CX_INJECT_H

#include "glibc_compat.h" /* first: symbol versions for glibc >= 2.17 */

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the wire format is little endian and records are copied as they are"
#endif

/* ---- CUPTI subset (REFERENCE.md §3.2, §3.3) ---- */
typedef int CUptiResult;
#define CX_CUPTI_SUCCESS 0
#define CX_CUPTI_MAX_LIMIT_REACHED 12
#define CX_CUPTI_MULTIPLE_SUBSCRIBERS 39
#define CX_KIND_MEMCPY 1
#define CX_KIND_MEMSET 2
#define CX_KIND_KERNEL 3
#define CX_KIND_DRIVER 4  /* CUpti_ActivityAPI records of driver calls (launch watch) */
#define CX_KIND_RUNTIME 5 /* the same for runtime calls */
#define CX_KIND_CONCURRENT_KERNEL 10
#define CX_KIND_MEMCPY2 22 /* peer-to-peer copies, CUpti_ActivityMemcpyPtoP */
#define CX_COPY_PTOP 10    /* CUpti_ActivityMemcpyKind PTOP */
#define CX_CUPTI_FIRST_SAFE_NULL_BUFFER 130000u /* NULL buffers segfault below API 27 */

typedef void (*cx_request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*cx_complete_fn)(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);

struct cx_cupti {
	CUptiResult (*get_version)(uint32_t *);
	CUptiResult (*register_callbacks)(cx_request_fn, cx_complete_fn);
	CUptiResult (*enable)(int kind);
	CUptiResult (*disable)(int kind);
	CUptiResult (*get_next_record)(uint8_t *buf, size_t valid, void **rec);
	CUptiResult (*get_num_dropped)(void *ctx, uint32_t stream, size_t *dropped);
	CUptiResult (*flush_all)(uint32_t flag);
	CUptiResult (*get_result_string)(CUptiResult, const char **);
	CUptiResult (*get_timestamp)(uint64_t *);
};

/* ---- wire format (docs/wire-format.md) ---- */
#define CX_WIRE_VERSION 3 /* 2: coverage frames; 3: launch frames */
#define CX_WIRE_MAGIC 0x57415843u
#define CX_HEADER_SIZE 12
#define CX_MAX_PAYLOAD (1u << 20)
#define CX_MAX_STRING 4096
#define CX_MAX_NAME_ID 65535
#define CX_MAX_STRING_BYTES (16u << 20)
#define CX_MAX_DEVICES 64
#define CX_RECORDS_HEADER 16
#define CX_MAX_RECORDS_PER_FRAME ((CX_MAX_PAYLOAD - CX_RECORDS_HEADER) / 48)
enum {
	CX_FRAME_HELLO = 1,
	CX_FRAME_STRINGS = 2,
	CX_FRAME_RECORDS = 3,
	CX_FRAME_DROPS = 4,
	CX_FRAME_GOODBYE = 5,
	CX_FRAME_COVERAGE = 6,
	CX_FRAME_LAUNCH = 7
};
#define CX_LAUNCH_PAYLOAD 16
#define CX_SPAN_SIZE 24
#define CX_SPANS_PER_FRAME 64 /* the library's own bound, well under the format's */
enum { CX_WIRE_KERNEL = 1, CX_WIRE_MEMCPY = 2, CX_WIRE_MEMSET = 3 };

/* Drop reasons, in wire order. */
enum {
	CX_DROP_POOL_EXHAUSTED,
	CX_DROP_QUEUE_FULL,
	CX_DROP_CUPTI,
	CX_DROP_VERSION_REFUSED,
	CX_DROP_UNKNOWN_RECORD,
	CX_DROP_NAME_TABLE_FULL,
	CX_NUM_DROPS
};

/* One record exactly as it goes on the wire (48 bytes, little endian). */
struct cx_record {
	uint8_t kind, copy_kind, src_kind, dst_kind, memory_kind, reserved0[3];
	uint32_t device, stream;
	uint64_t start, duration, bytes;
	uint32_t name_id;
	uint32_t src_device; /* PtoP copies (copy kind 10): source device; device holds the destination */
};
_Static_assert(sizeof(struct cx_record) == 48, "wire record is 48 bytes");

struct cx_hello {
	uint32_t pid, cuda_version, cupti_version;
	uint64_t start_time_ns;
	char exe[CX_MAX_STRING + 1], cgroup[CX_MAX_STRING + 1];
	char pod[256], namespace_[256], container[256];
	int ndevices;
	char uuids[CX_MAX_DEVICES][48];
};

/* ---- config.c ---- */
struct cx_config {
	char socket_path[108];
	int kernel, memcpy, memset, ptop; /* kinds to enable (ptop: MEMCPY2) */
	size_t buffer_size;         /* bytes per CUPTI buffer */
	int buffer_count;           /* pool bound */
	size_t queue_records;       /* send-queue bound */
	int flush_ms;               /* cuptiActivityFlushAll(0) period */
	int quiet_after_ms;         /* no record for this long: the process is quiet */
	int quiet_flush_ms;         /* FlushAll(0) period while quiet (0: off), so that the first
				     * kernel after a quiet spell reaches the exporter at once */
	int launch_watch;           /* while quiet, watch API calls for the first that submits work */
	double duty_cycle;          /* fraction of each duty period traced, 1 = always */
	int duty_period_ms;
	int exit_timeout_ms;        /* how long the atexit handler waits for the sender */
	int log_level;              /* 0 quiet, 1 warnings (default), 2 debug */
	int disabled;
	char cupti_library[512];    /* empty: the usual sonames */
	char cuda_library[512];
	char step_aside_env[512];   /* comma list of variables that mark another CUPTI tool */
};
void cx_config_load(struct cx_config *c);
/* The first variable of CUPTI_EXPORTER_STEP_ASIDE_ENV that is set, or NULL. */
const char *cx_config_other_tool(const struct cx_config *c);
void cx_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- buffers.c: bounded pool of CUPTI buffers ---- */
int cx_pool_init(int count, size_t size, int may_refuse);
uint8_t *cx_pool_get(size_t *size); /* NULL when refused (counted) */
void cx_pool_put(uint8_t *buf);
int cx_pool_outstanding(void);
unsigned long cx_pool_extras(void); /* buffers allocated beyond the bound (CUPTI < 13.0) */

/* ---- records.c: CUPTI records by offset, versions ---- */
int cx_records_version_known(uint32_t version);
/* Converts one completed CUPTI buffer into wire records and queues them. */
void cx_records_consume(const struct cx_cupti *cupti, uint8_t *buf, size_t valid);

/* ---- names.c: process-wide kernel-name table ---- */
uint32_t cx_names_intern(const char *s); /* 0 when the table is full */
const char *cx_names_get(uint32_t id, uint16_t *len);

/* ---- queue.c: bounded record queue between callbacks and the sender ---- */
int cx_queue_init(size_t cap);
size_t cx_queue_push(const struct cx_record *r, size_t n); /* returns how many fitted */
size_t cx_queue_pop(struct cx_record *out, size_t max, int timeout_ms);
void cx_queue_wake(void);
size_t cx_queue_discard(void); /* empties the queue, returns how many were in it */
uint64_t cx_queue_pushed(void); /* records ever pushed (the sequence number of the next one) */

/* ---- wire.c: frame encoding ---- */
size_t cx_wire_header(uint8_t *dst, int type, uint32_t len);
size_t cx_wire_hello(uint8_t *dst, size_t cap, const struct cx_hello *h);
size_t cx_wire_drops(uint8_t *dst, int goodbye, uint64_t sent, const uint64_t *drops);
size_t cx_wire_records(uint8_t *dst, uint64_t drop_total, const struct cx_record *r, uint32_t n);
/* strings frame: begin, add entries while they fit, finish */
size_t cx_wire_strings_begin(uint8_t *dst);
size_t cx_wire_strings_add(uint8_t *dst, size_t at, uint32_t id, const char *s, uint16_t len);
void cx_wire_strings_finish(uint8_t *dst, size_t len, uint32_t count);
size_t cx_wire_coverage(uint8_t *dst, const uint64_t (*spans)[2], const int *lossy, uint32_t n);
size_t cx_wire_launch(uint8_t *dst, uint64_t ts, uint32_t kind, uint32_t cbid);

/* ---- launch.c: the launch watch (API records while quiet) ---- */
void cx_launch_record(const uint8_t *rec); /* a DRIVER or RUNTIME record (buffer callbacks) */
int cx_launch_take(uint64_t *ts, uint32_t *kind, uint32_t *cbid); /* the first work call since the last take */
void cx_launch_watch(int on); /* enables or disables the API kinds (sender thread) */

/* ---- coverage.c: the spans this process traced (sender thread only) ---- */
uint64_t cx_coverage_loss_count(void);
void cx_coverage_open(uint64_t ts);
int cx_coverage_is_open(void);
void cx_coverage_close(uint64_t ts, int reopen); /* queues [open, ts] behind the records pushed so far */
void cx_coverage_mark_lossy(void);              /* the connection broke: unsent spans lost records */
int cx_coverage_ready(uint64_t consumed);       /* a span waits whose records are all consumed */
size_t cx_coverage_append(uint8_t *dst, uint64_t consumed); /* a coverage frame of ready spans, or 0 */
void cx_coverage_sent(void);                    /* the spans appended so far reached the socket */
size_t cx_coverage_append_all_lossy(uint8_t *dst);
void cx_coverage_stats(uint64_t *pending, uint64_t *merged, uint64_t *dropped);

/* ---- conn.c: non-blocking Unix socket with backoff ---- */
struct cx_conn {
	int fd;
	int backoff_ms;
	uint64_t next_try_ns;
};
void cx_conn_init(struct cx_conn *c);
int cx_conn_try_open(struct cx_conn *c, const char *path, uint64_t now_ns); /* 1 connected */
/* Writes what it can; returns bytes written (0 on EAGAIN) or -1 (closed, backoff armed). */
long cx_conn_write(struct cx_conn *c, const uint8_t *p, size_t n, uint64_t now_ns);
int cx_conn_wait_writable(struct cx_conn *c, int timeout_ms);
void cx_conn_close(struct cx_conn *c, uint64_t now_ns);

/* ---- proc.c: what hello says about this process ---- */
void cx_proc_hello(struct cx_hello *h, uint32_t cupti_version, const char *cuda_library);

/* ---- sender.c ---- */
int cx_sender_start(int refused);
void cx_sender_finish(int timeout_ms); /* sends goodbye, waits up to timeout */
uint64_t cx_sender_sent(void);          /* records written to the socket */

/* ---- inject.c: process-wide state ---- */
struct cx_state {
	struct cx_config cfg;
	struct cx_cupti cupti;
	uint32_t cupti_version;
	pid_t pid;             /* the initialising process */
	atomic_int child;      /* set in a forked child: no CUPTI calls, no sending */
	atomic_int tracing;    /* kinds enabled */
	uint64_t trace_start;  /* cuptiGetTimestamp right after the kinds were first enabled */
	_Atomic uint64_t trace_end; /* cuptiGetTimestamp at exit, before the forced flush; 0 before */
	_Atomic uint64_t drops[CX_NUM_DROPS];
	_Atomic uint64_t records_queued;
	_Atomic uint64_t records_seen; /* every record converted, queued or not: activity */
	_Atomic uint64_t quiet_flushes; /* FlushAll(0) calls of the quiet flush (sender.c) */
	_Atomic uint64_t launch_watches; /* times the launch watch was turned on (launch.c) */
	_Atomic uint64_t launch_frames;  /* launch frames queued (sender.c) */
};
extern struct cx_state cx_g;
uint64_t cx_now_ns(void); /* CLOCK_MONOTONIC */
void cx_count_drop(int reason, uint64_t n);
/* 0 ok, else the CUPTI result. *ts: CUPTI time right after enabling, or right before disabling. */
int cx_enable_kinds(int enable, uint64_t *ts);
uint64_t cx_cupti_time(void); /* cuptiGetTimestamp, 0 on failure */

#endif
