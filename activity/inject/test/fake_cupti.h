/* Controls of the fake libcupti (test only). The harness reaches them with
 * dlsym on the same library the injection library loaded. */
#ifndef FAKE_CUPTI_H
#define FAKE_CUPTI_H
#include <stddef.h>
#include <stdint.h>

#define FAKE_KERNEL_SIZE 216 /* CUpti_ActivityKernel10 */
#define FAKE_MEMCPY_SIZE 96  /* CUpti_ActivityMemcpy6 */
#define FAKE_MEMSET_SIZE 88  /* CUpti_ActivityMemset4 */
#define FAKE_PTOP_SIZE 96    /* CUpti_ActivityMemcpyPtoP4 */
#define FAKE_OTHER_KIND 17   /* OVERHEAD: a kind the library does not read */
#define FAKE_OTHER_SIZE 32
#define FAKE_API_SIZE 40     /* CUpti_ActivityAPI (kinds 4 driver, 5 runtime) */

struct fake_api {
	int (*request)(uint8_t **buf, size_t *size);   /* calls the registered request callback */
	void (*complete)(uint8_t *buf, size_t valid);   /* calls the registered completion callback */
	size_t (*fill)(uint8_t *buf, size_t size, uint64_t first, int n); /* synthetic records g = first.. */
	size_t (*fill_other)(uint8_t *buf, size_t size);                 /* one record of an unknown kind */
	int (*registered)(void);
	int (*enabled)(int kind);
	int (*enable_calls)(void);
	int (*disable_calls)(void);
	int (*flush_calls)(int forced);
	void (*set_dropped)(size_t n);
	/* Windows during which kind 10 (kernels) was enabled, by cuptiGetTimestamp's clock;
	 * end 0 = still enabled. Returns how many (at most max). */
	int (*windows)(uint64_t (*w)[2], int max);
	uint64_t (*now)(void); /* cuptiGetTimestamp's clock */
	/* one API record (kind 4 driver or 5 runtime) of callback id cbid starting at start */
	size_t (*fill_api)(uint8_t *buf, size_t size, uint32_t kind, uint32_t cbid, uint64_t start);
};

/* Expected fields of synthetic record g (the Go integration test mirrors this). */
static inline int fake_kind(uint64_t g) { return (int)(g % 3); } /* 0 kernel, 1 memcpy, 2 memset */
static inline uint64_t fake_start(uint64_t g) { return 1000 * g + 1; }
static inline uint64_t fake_duration(uint64_t g) { return 100 + g % 7; }
static inline uint32_t fake_device(uint64_t g) { return (uint32_t)(g % 2); }
static inline uint32_t fake_stream(uint64_t g) { return (uint32_t)(7 + g / 1000000); }
static inline uint64_t fake_bytes(uint64_t g) { return fake_kind(g) == 1 ? 4096 + g : fake_kind(g) == 2 ? 512 + g : 0; }
/* One memcpy in five is a peer-to-peer copy (CUPTI kind MEMCPY2, copy kind 10) from the
 * other device to fake_device(g); its CUPTI deviceId is the source, so reading the wrong
 * offset for the destination shows. */
static inline int fake_ptop(uint64_t g) { return fake_kind(g) == 1 && g % 5 == 0; }
static inline int fake_copy_kind(uint64_t g) { return fake_ptop(g) ? 10 : fake_kind(g) == 1 ? 1 + (int)(g % 2) : 0; }
static inline uint32_t fake_src_device(uint64_t g) { return fake_ptop(g) ? 1 - fake_device(g) : 0; }
/* kernel name: "kernel_<g % 5>"; memcpy src 1 dst 3 (PtoP: src 3 dst 3); memset memory kind 3 */

#endif
