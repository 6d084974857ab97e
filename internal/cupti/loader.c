/* loader.c: see loader.h. */
#define _GNU_SOURCE
#include "loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fn_names[CX_FN_COUNT + 1] = {
#define CX_NAME(name) #name,
	CX_REQUIRED_FNS(CX_NAME) "",
	CX_OPTIONAL_FNS(CX_NAME)
#undef CX_NAME
};

const char *cx_fn_name(int id) {
	if (id < 0 || id >= CX_FN_COUNT)
		return "?";
	return fn_names[id];
}

static const char *dlerr(void) {
	const char *e = dlerror();
	return e ? e : "unknown dlerror";
}

int cx_preload_nvperf(cx_lib *l, const char *dir, int which, char *err, size_t errlen) {
	char path[4200];
	int failed = 0;
	err[0] = 0;
	snprintf(path, sizeof path, "%s/libnvperf_host.so", dir);
	if ((which & CX_NVPERF_HOST) && !l->nvperf_host && !(l->nvperf_host = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE))) {
		failed |= CX_NVPERF_HOST;
		snprintf(err, errlen, "%s", dlerr());
	}
	snprintf(path, sizeof path, "%s/libnvperf_target.so", dir);
	if ((which & CX_NVPERF_TARGET) && !l->nvperf_target && !(l->nvperf_target = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE))) {
		failed |= CX_NVPERF_TARGET;
		size_t n = strlen(err);
		snprintf(err + n, errlen - n, "%s%s", n ? "; " : "", dlerr());
	}
	return failed;
}

static void *sym(void *h, const char *name, char *err, size_t errlen) {
	dlerror();
	void *p = dlsym(h, name);
	if (!p && err)
		snprintf(err, errlen, "symbol %s: %s", name, dlerr());
	return p;
}

int cx_open_cupti(cx_lib *l, const char *path, const char *nvperf_dir, char *err, size_t errlen) {
	char nverr[1024];
	if (nvperf_dir)
		cx_preload_nvperf(l, nvperf_dir, CX_NVPERF_HOST, nverr, sizeof nverr); /* absence is reported by the caller */
	l->cupti = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); /* the profiler outlives a Lib: lib_cgo.go profilerReady */
	if (!l->cupti) {
		snprintf(err, errlen, "%s", dlerr());
		return -1;
	}
	/* Where did it come from? (a bare soname is found by the loader) */
	Dl_info info;
	void *probe = dlsym(l->cupti, "cuptiGetVersion");
	l->cupti_dir[0] = 0;
	if (probe && dladdr(probe, &info) && info.dli_fname) {
		snprintf(l->cupti_dir, sizeof l->cupti_dir, "%s", info.dli_fname);
		char *slash = strrchr(l->cupti_dir, '/');
		if (slash)
			*slash = 0;
		else
			l->cupti_dir[0] = 0;
	}
	if (!(l->getVersion = (cx_cuptiGetVersion_fn)sym(l->cupti, "cuptiGetVersion", err, errlen)))
		return -1;
	if (!(l->getResultString = (cx_cuptiGetResultString_fn)sym(l->cupti, "cuptiGetResultString", err, errlen)))
		return -1;
	if (!(l->getTimestamp = (cx_cuptiGetTimestamp_fn)sym(l->cupti, "cuptiGetTimestamp", err, errlen)))
		return -1;
	for (int i = 0; i < CX_FN_REQUIRED_COUNT; i++)
		if (!(l->fn[i] = (cx_params_fn)sym(l->cupti, fn_names[i], err, errlen)))
			return -1;
	for (int i = CX_FN_REQUIRED_COUNT + 1; i < CX_FN_COUNT; i++)
		l->fn[i] = (cx_params_fn)sym(l->cupti, fn_names[i], NULL, 0);
	return 0;
}

int cx_open_cuda(cx_lib *l, const char *path, char *err, size_t errlen) {
	l->cuda = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!l->cuda) {
		snprintf(err, errlen, "%s", dlerr());
		return -1;
	}
#define CX_CU(field, name, type)                                   \
	if (!(l->field = (type)sym(l->cuda, name, err, errlen))) \
		return -1;
	CX_CU(cuInit, "cuInit", cx_cuInit_fn)
	CX_CU(cuDeviceGetCount, "cuDeviceGetCount", cx_cuDeviceGetCount_fn)
	CX_CU(cuDeviceGet, "cuDeviceGet", cx_cuDeviceGet_fn)
	CX_CU(cuDeviceGetName, "cuDeviceGetName", cx_cuDeviceGetName_fn)
	/* _v2 (CUDA 11.4+) reports MIG instance UUIDs; the plain name is the fallback. */
	if (!(l->cuDeviceGetUuid = (cx_cuDeviceGetUuid_fn)sym(l->cuda, "cuDeviceGetUuid_v2", NULL, 0)))
		CX_CU(cuDeviceGetUuid, "cuDeviceGetUuid", cx_cuDeviceGetUuid_fn)
	CX_CU(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", cx_cuDeviceGetPCIBusId_fn)
#undef CX_CU
	return 0;
}

void cx_close(cx_lib *l) {
	void **hs[] = {&l->cupti, &l->nvperf_target, &l->nvperf_host, &l->cuda};
	for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
		if (*hs[i]) {
			dlclose(*hs[i]);
			*hs[i] = NULL;
		}
	/* Zero every pointer: later calls through a closed table return an error, never jump. The
	 * struct itself is never freed, so safety-net cleanups of child handles stay harmless. */
	memset(l, 0, sizeof *l);
}

CUptiResult cx_call(cx_lib *l, int id, void *params) {
	if (id < 0 || id >= CX_FN_COUNT || !l->fn[id])
		return 11; /* CUPTI_ERROR_API_NOT_IMPLEMENTED */
	return l->fn[id](params);
}

cx_sample_info_result cx_sample_info(cx_lib *l, CUpti_PmSampling_Object *obj, const uint8_t *img, size_t size,
				     size_t i) {
	CUpti_PmSampling_CounterData_GetSampleInfo_Params p = {
		.structSize = CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE,
		.pPmSamplingObject = obj,
		.pCounterDataImage = img,
		.counterDataImageSize = size,
		.sampleIndex = i,
	};
	cx_sample_info_result res = {.r = cx_call(l, CX_FN_cuptiPmSamplingCounterDataGetSampleInfo, &p)};
	if (res.r == 0) {
		res.start = p.startTimestamp;
		res.end = p.endTimestamp;
	}
	return res;
}

CUptiResult cx_evaluate(cx_lib *l, CUpti_Profiler_Host_Object *obj, const uint8_t *img, size_t size, size_t i,
			const char **names, size_t n, double *out) {
	CUpti_Profiler_Host_EvaluateToGpuValues_Params p = {
		.structSize = CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE,
		.pHostObject = obj,
		.pCounterDataImage = img,
		.counterDataImageSize = size,
		.rangeIndex = i,
		.ppMetricNames = names,
		.numMetrics = n,
		.pMetricValues = out,
	};
	return cx_call(l, CX_FN_cuptiProfilerHostEvaluateToGpuValues, &p);
}

cx_decode_result cx_decode(cx_lib *l, CUpti_PmSampling_Object *obj, uint8_t *img, size_t size) {
	CUpti_PmSampling_DecodeData_Params p = {
		.structSize = CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE,
		.pPmSamplingObject = obj,
		.pCounterDataImage = img,
		.counterDataImageSize = size,
	};
	cx_decode_result res = {.r = cx_call(l, CX_FN_cuptiPmSamplingDecodeData, &p)};
	res.stop_reason = (int)p.decodeStopReason;
	res.overflow = p.overflow != 0;
	return res;
}

cx_counter_data_info_result cx_counter_data_info(cx_lib *l, const uint8_t *img, size_t size) {
	CUpti_PmSampling_GetCounterDataInfo_Params p = {
		.structSize = CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE,
		.pCounterDataImage = img,
		.counterDataImageSize = size,
	};
	cx_counter_data_info_result res = {.r = cx_call(l, CX_FN_cuptiPmSamplingGetCounterDataInfo, &p)};
	if (res.r == 0) {
		res.total = p.numTotalSamples;
		res.populated = p.numPopulatedSamples;
		res.completed = p.numCompletedSamples;
	}
	return res;
}

CUptiResult cx_counter_data_init(cx_lib *l, CUpti_PmSampling_Object *obj, uint8_t *img, size_t size) {
	CUpti_PmSampling_CounterDataImage_Initialize_Params p = {
		.structSize = CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE,
		.pPmSamplingObject = obj,
		.counterDataSize = size,
		.pCounterData = img,
	};
	return cx_call(l, CX_FN_cuptiPmSamplingCounterDataImageInitialize, &p);
}

CUptiResult cx_get_version(cx_lib *l, uint32_t *v) { return l->getVersion ? l->getVersion(v) : 11; }
CUptiResult cx_get_timestamp(cx_lib *l, uint64_t *ts) { return l->getTimestamp ? l->getTimestamp(ts) : 11; }

const char *cx_result_string(cx_lib *l, CUptiResult r) {
	const char *s = NULL;
	if (!l->getResultString || l->getResultString(r, &s) != 0)
		return NULL;
	return s;
}

CUresult cx_cu_init(cx_lib *l) { return l->cuInit ? l->cuInit(0) : 4 /* DEINITIALIZED */; }
CUresult cx_cu_device_count(cx_lib *l, int *n) { return l->cuDeviceGetCount ? l->cuDeviceGetCount(n) : 4; }

CUresult cx_cu_device_info(cx_lib *l, int ordinal, CUdevice *dev, char *name, int namelen, unsigned char *uuid,
			   char *pci, int pcilen, const char **fn) {
	CUresult r;
	CUuuid u;
	*fn = "cuDeviceGet";
	if (!l->cuDeviceGet)
		return 4; /* CUDA_ERROR_DEINITIALIZED: the Lib was closed */
	if ((r = l->cuDeviceGet(dev, ordinal)) != 0)
		return r;
	*fn = "cuDeviceGetName";
	if ((r = l->cuDeviceGetName(name, namelen, *dev)) != 0)
		return r;
	*fn = "cuDeviceGetUuid";
	if ((r = l->cuDeviceGetUuid(&u, *dev)) != 0)
		return r;
	memcpy(uuid, u.bytes, 16);
	*fn = "cuDeviceGetPCIBusId";
	return l->cuDeviceGetPCIBusId(pci, pcilen, *dev);
}

cx_buf *cx_buf_new(size_t n) {
	cx_buf *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	b->p = calloc(1, n ? n : 1);
	if (!b->p) {
		free(b);
		return NULL;
	}
	b->n = n;
	b->refs = 1;
	return b;
}

void cx_buf_ref(cx_buf *b) { __atomic_add_fetch(&b->refs, 1, __ATOMIC_SEQ_CST); }

void cx_buf_unref(cx_buf *b) {
	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_SEQ_CST) == 0) {
		free(b->p);
		free(b);
	}
}
