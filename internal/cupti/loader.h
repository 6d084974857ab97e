/*
 * loader.h: dlopen/dlsym of libcupti, the nvperf libraries and libcuda, and one thin C call
 * wrapper per entry point (cgo cannot call C function pointers). Every symbol is resolved once,
 * with RTLD_NOW, in cx_open_cupti / cx_open_cuda.
 */
#ifndef CUPTI_EXPORTER_LOADER_H
#define CUPTI_EXPORTER_LOADER_H

#include "cupti_decl.h"

/* Required libcupti entry points of the shape CUptiResult fn(Params *). */
#define CX_REQUIRED_FNS(X)                              \
	X(cuptiProfilerInitialize)                      \
	X(cuptiProfilerDeInitialize)                    \
	X(cuptiProfilerDeviceSupported)                 \
	X(cuptiDeviceGetChipName)                       \
	X(cuptiPmSamplingGetCounterAvailability)        \
	X(cuptiPmSamplingEnable)                        \
	X(cuptiPmSamplingSetConfig)                     \
	X(cuptiPmSamplingGetCounterDataSize)            \
	X(cuptiPmSamplingCounterDataImageInitialize)    \
	X(cuptiPmSamplingStart)                         \
	X(cuptiPmSamplingDecodeData)                    \
	X(cuptiPmSamplingGetCounterDataInfo)            \
	X(cuptiPmSamplingCounterDataGetSampleInfo)      \
	X(cuptiPmSamplingStop)                          \
	X(cuptiPmSamplingDisable)                       \
	X(cuptiProfilerHostInitialize)                  \
	X(cuptiProfilerHostDeinitialize)                \
	X(cuptiProfilerHostConfigAddMetrics)            \
	X(cuptiProfilerHostGetConfigImageSize)          \
	X(cuptiProfilerHostGetConfigImage)              \
	X(cuptiProfilerHostGetNumOfPasses)              \
	X(cuptiProfilerHostEvaluateToGpuValues)         \
	X(cuptiProfilerHostGetBaseMetrics)              \
	X(cuptiProfilerHostGetSubMetrics)               \
	X(cuptiProfilerHostGetMetricProperties)         \
	X(cuptiProfilerHostGetSupportedChips)           \
	X(cuptiProfilerHostGetMaxNumHardwareMetricsPerPass)

/* Optional (CUPTI 13.2+, API 130200): left NULL when absent. */
#define CX_OPTIONAL_FNS(X)                    \
	X(cuptiProfilerHostGetSinglePassSets) \
	X(cuptiProfilerHostGetMetricsInSinglePassSet)

typedef enum {
#define CX_ENUM(name) CX_FN_##name,
	CX_REQUIRED_FNS(CX_ENUM) CX_FN_REQUIRED_COUNT,
	CX_OPTIONAL_FNS(CX_ENUM) CX_FN_COUNT
#undef CX_ENUM
} cx_fn_id;

typedef struct cx_lib {
	void *cupti, *nvperf_host, *nvperf_target, *cuda;
	char cupti_dir[4096]; /* folder libcupti was loaded from */
	cx_params_fn fn[CX_FN_COUNT];
	cx_cuptiGetVersion_fn getVersion;
	cx_cuptiGetResultString_fn getResultString;
	cx_cuptiGetTimestamp_fn getTimestamp;
	cx_cuInit_fn cuInit;
	cx_cuDeviceGetCount_fn cuDeviceGetCount;
	cx_cuDeviceGet_fn cuDeviceGet;
	cx_cuDeviceGetName_fn cuDeviceGetName;
	cx_cuDeviceGetUuid_fn cuDeviceGetUuid;
	cx_cuDeviceGetPCIBusId_fn cuDeviceGetPCIBusId;
} cx_lib;

const char *cx_fn_name(int id);

/* cx_open_cupti loads libcupti from path (an absolute file, or a bare soname for the loader's
 * search), preloading libnvperf_host.so (RTLD_NOW|RTLD_GLOBAL) from nvperf_dir when it is not
 * NULL, then resolves every symbol. On failure it returns -1 and writes the reason, with
 * dlerror's text, into err. */
int cx_open_cupti(cx_lib *l, const char *path, const char *nvperf_dir, char *err, size_t errlen);
/* cx_preload_nvperf loads the nvperf libraries named in which (CX_NVPERF_* bits) from dir;
 * returns the bits of those that failed. libnvperf_target.so costs about 100 MB of resident
 * memory on load (measured on an H200) and CUPTI 13.0's PM sampling does not load it, so it is
 * preloaded only when a profiler call reports NOT_INITIALIZED (lib_cgo.go). */
enum { CX_NVPERF_HOST = 1, CX_NVPERF_TARGET = 2 };
int cx_preload_nvperf(cx_lib *l, const char *dir, int which, char *err, size_t errlen);
int cx_open_cuda(cx_lib *l, const char *path, char *err, size_t errlen);
void cx_close(cx_lib *l);

CUptiResult cx_call(cx_lib *l, int id, void *params);
/* cx_sample_info and cx_evaluate are cuptiPmSamplingCounterDataGetSampleInfo and
 * cuptiProfilerHostEvaluateToGpuValues, called once per sample each, with their params on the C
 * stack: a Go params struct whose address goes to C escapes to the heap, two allocations a
 * sample. */
typedef struct cx_sample_info_result {
	CUptiResult r;
	uint64_t start, end;
} cx_sample_info_result;
cx_sample_info_result cx_sample_info(cx_lib *l, CUpti_PmSampling_Object *obj, const uint8_t *img, size_t size,
				     size_t i);
CUptiResult cx_evaluate(cx_lib *l, CUpti_Profiler_Host_Object *obj, const uint8_t *img, size_t size, size_t i,
			const char **names, size_t n, double *out);
/* cx_decode, cx_counter_data_info and cx_counter_data_init are cuptiPmSamplingDecodeData,
 * cuptiPmSamplingGetCounterDataInfo and cuptiPmSamplingCounterDataImageInitialize, for the Go
 * methods (session_cgo.go) and the decoding thread (decoder.c) alike. */
typedef struct cx_decode_result {
	CUptiResult r;
	int stop_reason, overflow;
} cx_decode_result;
cx_decode_result cx_decode(cx_lib *l, CUpti_PmSampling_Object *obj, uint8_t *img, size_t size);
typedef struct cx_counter_data_info_result {
	CUptiResult r;
	size_t total, populated, completed;
} cx_counter_data_info_result;
cx_counter_data_info_result cx_counter_data_info(cx_lib *l, const uint8_t *img, size_t size);
CUptiResult cx_counter_data_init(cx_lib *l, CUpti_PmSampling_Object *obj, uint8_t *img, size_t size);
CUptiResult cx_get_version(cx_lib *l, uint32_t *v);
CUptiResult cx_get_timestamp(cx_lib *l, uint64_t *ts);
const char *cx_result_string(cx_lib *l, CUptiResult r);
CUresult cx_cu_init(cx_lib *l);
CUresult cx_cu_device_count(cx_lib *l, int *n);
/* cx_cu_device_info fills name, the 16 UUID bytes and the PCI bus id of ordinal. It returns the
 * first failing driver result and names the call in *fn. */
CUresult cx_cu_device_info(cx_lib *l, int ordinal, CUdevice *dev, char *name, int namelen, unsigned char *uuid,
			   char *pci, int pcilen, const char **fn);

/* Reference-counted C memory for buffers CUPTI keeps (the config image until Disable). */
typedef struct cx_buf {
	uint8_t *p;
	size_t n;
	int refs;
} cx_buf;
cx_buf *cx_buf_new(size_t n);
void cx_buf_ref(cx_buf *b);
void cx_buf_unref(cx_buf *b);

#endif
