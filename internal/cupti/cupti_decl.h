/*
 * cupti_decl.h: the project's own declarations of the CUPTI 13.0 and CUDA driver subset that
 * cupti-exporter uses. Written from the layout facts in shared/cupti/REFERENCE.md sections 0-2 and 5
 * (x86-64 LP64); no NVIDIA header is included or copied. scripts/gpu/layout_check.sh compares every
 * struct below with the real headers on a machine that has them.
 *
 * Every params struct starts with size_t structSize and void *pPriv. structSize must be set to the
 * X_STRUCT_SIZE value (offset of the last field plus its size), which is smaller than sizeof(X) for
 * DeviceSupported (52), DecodeData (45) and GetMetricProperties (60).
 */
#ifndef CUPTI_EXPORTER_CUPTI_DECL_H
#define CUPTI_EXPORTER_CUPTI_DECL_H

#include <stddef.h>
#include <stdint.h>

/* Size a params struct as CUPTI does: up to the end of its last field. */
#define CX_STRUCT_SIZE(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

/* ---- CUDA driver ---------------------------------------------------------------------------- */

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;

typedef CUresult (*cx_cuInit_fn)(unsigned int flags);
typedef CUresult (*cx_cuDeviceGetCount_fn)(int *count);
typedef CUresult (*cx_cuDeviceGet_fn)(CUdevice *device, int ordinal);
typedef CUresult (*cx_cuDeviceGetName_fn)(char *name, int len, CUdevice dev);
typedef CUresult (*cx_cuDeviceGetUuid_fn)(CUuuid *uuid, CUdevice dev);
typedef CUresult (*cx_cuDeviceGetPCIBusId_fn)(char *pciBusId, int len, CUdevice dev);

/* ---- CUPTI common --------------------------------------------------------------------------- */

typedef int CUptiResult; /* a 4-byte enum: CUPTI_SUCCESS = 0 */

typedef enum {
	CUPTI_METRIC_TYPE_COUNTER = 0,
	CUPTI_METRIC_TYPE_RATIO = 1,
	CUPTI_METRIC_TYPE_THROUGHPUT = 2
} CUpti_MetricType;

typedef enum { CUPTI_PROFILER_TYPE_RANGE_PROFILER = 0, CUPTI_PROFILER_TYPE_PM_SAMPLING = 1 } CUpti_ProfilerType;

typedef enum {
	CUPTI_PROFILER_RANGE_PROFILING = 0,
	CUPTI_PROFILER_PC_SAMPLING = 1,
	CUPTI_PROFILER_SASS_METRICS = 2,
	CUPTI_PROFILER_PM_SAMPLING = 3
} CUpti_Profiler_API;

typedef enum {
	CUPTI_PROFILER_CONFIGURATION_UNKNOWN = 0,
	CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED = 1,
	CUPTI_PROFILER_CONFIGURATION_DISABLED = 2,
	CUPTI_PROFILER_CONFIGURATION_SUPPORTED = 3,
	CUPTI_PROFILER_CONFIGURATION_LIMITED_SUPPORT = 4 /* 13.3+ */
} CUpti_Profiler_Support_Level;

typedef enum {
	CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL = 0,
	CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL = 1
} CUpti_PmSampling_TriggerMode;

typedef enum {
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER = 0,
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL = 1,
	CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS = 2
} CUpti_PmSampling_DecodeStopReason;

typedef enum {
	CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST = 0,
	CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST = 1
} CUpti_PmSampling_HardwareBuffer_AppendMode;

typedef struct CUpti_PmSampling_Object CUpti_PmSampling_Object;
typedef struct CUpti_Profiler_Host_Object CUpti_Profiler_Host_Object;

/* ---- Profiler target / device (cupti_profiler_target.h, cupti_target.h) ---------------------- */

typedef struct {
	size_t structSize;
	void *pPriv;
} CUpti_Profiler_Initialize_Params;
#define CUpti_Profiler_Initialize_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_Profiler_Initialize_Params, pPriv)

typedef struct {
	size_t structSize;
	void *pPriv;
} CUpti_Profiler_DeInitialize_Params;
#define CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_Profiler_DeInitialize_Params, pPriv)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUdevice cuDevice;
	CUpti_Profiler_Support_Level isSupported;
	CUpti_Profiler_Support_Level architecture;
	CUpti_Profiler_Support_Level sli;
	CUpti_Profiler_Support_Level vGpu;
	CUpti_Profiler_Support_Level confidentialCompute;
	CUpti_Profiler_Support_Level cmp;
	CUpti_Profiler_Support_Level wsl;
	CUpti_Profiler_API api; /* the last field in 13.0: STRUCT_SIZE 52, sizeof 56 */
} CUpti_Profiler_DeviceSupported_Params;
#define CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_Profiler_DeviceSupported_Params, api)

typedef struct {
	size_t structSize;
	void *pPriv;
	size_t deviceIndex;
	const char *pChipName; /* CUPTI-owned */
} CUpti_Device_GetChipName_Params;
#define CUpti_Device_GetChipName_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_Device_GetChipName_Params, pChipName)

/* ---- PM sampling (cupti_pmsampling.h) -------------------------------------------------------- */

typedef struct {
	size_t structSize;
	void *pPriv;
	size_t deviceIndex;
	size_t counterAvailabilityImageSize;
	uint8_t *pCounterAvailabilityImage;
} CUpti_PmSampling_GetCounterAvailability_Params;
#define CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage)

typedef struct {
	size_t structSize;
	void *pPriv;
	size_t deviceIndex;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Enable_Params;
#define CUpti_PmSampling_Enable_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_PmSampling_Enable_Params, pPmSamplingObject)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	size_t configSize;
	const uint8_t *pConfig; /* kept by CUPTI until Disable */
	size_t hardwareBufferSize;
	uint64_t samplingInterval;
	CUpti_PmSampling_TriggerMode triggerMode;
	CUpti_PmSampling_HardwareBuffer_AppendMode hwBufferAppendMode; /* API 26 (12.8)+ */
} CUpti_PmSampling_SetConfig_Params;
#define CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode)
/* Before API 26 the struct ended at triggerMode. */
#define CX_SETCONFIG_STRUCT_SIZE_PRE_APPEND_MODE CX_STRUCT_SIZE(CUpti_PmSampling_SetConfig_Params, triggerMode)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	const char **pMetricNames;
	size_t numMetrics;
	uint32_t maxSamples;
	size_t counterDataSize;
} CUpti_PmSampling_GetCounterDataSize_Params;
#define CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	size_t counterDataSize;
	uint8_t *pCounterData;
} CUpti_PmSampling_CounterDataImage_Initialize_Params;
#define CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Start_Params;
#define CUpti_PmSampling_Start_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_PmSampling_Start_Params, pPmSamplingObject)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Stop_Params;
#define CUpti_PmSampling_Stop_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_PmSampling_Stop_Params, pPmSamplingObject)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
} CUpti_PmSampling_Disable_Params;
#define CUpti_PmSampling_Disable_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_PmSampling_Disable_Params, pPmSamplingObject)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	CUpti_PmSampling_DecodeStopReason decodeStopReason;
	uint8_t overflow; /* the last field: STRUCT_SIZE 45, sizeof 48 */
} CUpti_PmSampling_DecodeData_Params;
#define CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_PmSampling_DecodeData_Params, overflow)

typedef struct {
	size_t structSize;
	void *pPriv;
	const uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	size_t numTotalSamples;
	size_t numPopulatedSamples;
	size_t numCompletedSamples;
} CUpti_PmSampling_GetCounterDataInfo_Params;
#define CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_PmSampling_Object *pPmSamplingObject;
	const uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	size_t sampleIndex;
	uint64_t startTimestamp;
	uint64_t endTimestamp;
} CUpti_PmSampling_CounterData_GetSampleInfo_Params;
#define CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp)

/* ---- Profiler host (cupti_profiler_host.h) --------------------------------------------------- */

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_ProfilerType profilerType;
	const char *pChipName;
	const uint8_t *pCounterAvailabilityImage; /* may be NULL */
	CUpti_Profiler_Host_Object *pHostObject;
} CUpti_Profiler_Host_Initialize_Params;
#define CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE CX_STRUCT_SIZE(CUpti_Profiler_Host_Initialize_Params, pHostObject)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
} CUpti_Profiler_Host_Deinitialize_Params;
#define CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_Deinitialize_Params, pHostObject)

typedef struct {
	size_t structSize;
	void *pPriv;
	size_t numChips;
	const char *const *ppChipNames; /* CUPTI-owned */
} CUpti_Profiler_Host_GetSupportedChips_Params;
#define CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetSupportedChips_Params, ppChipNames)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	CUpti_MetricType metricType;
	const char **ppMetricNames; /* CUPTI-owned */
	size_t numMetrics;
} CUpti_Profiler_Host_GetBaseMetrics_Params;
#define CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	CUpti_MetricType metricType;
	const char *pMetricName;
	size_t numOfSubmetrics;
	const char **ppSubMetrics; /* CUPTI-owned */
} CUpti_Profiler_Host_GetSubMetrics_Params;
#define CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetSubMetrics_Params, ppSubMetrics)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	const char *pMetricName;
	const char *pDescription; /* CUPTI-owned */
	const char *pHwUnit;      /* CUPTI-owned */
	const char *pDimUnit;     /* CUPTI-owned */
	CUpti_MetricType metricType; /* the last field in 13.0: STRUCT_SIZE 60, sizeof 64 */
} CUpti_Profiler_Host_GetMetricProperties_Params;
#define CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetMetricProperties_Params, metricType)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	const char **ppMetricNames;
	size_t numMetrics;
} CUpti_Profiler_Host_ConfigAddMetrics_Params;
#define CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	size_t configImageSize;
} CUpti_Profiler_Host_GetConfigImageSize_Params;
#define CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	size_t configImageSize;
	uint8_t *pConfigImage;
} CUpti_Profiler_Host_GetConfigImage_Params;
#define CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage)

typedef struct {
	size_t structSize;
	void *pPriv;
	size_t configImageSize;
	uint8_t *pConfigImage;
	size_t numOfPasses;
} CUpti_Profiler_Host_GetNumOfPasses_Params;
#define CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_ProfilerType profilerType;
	const char *pChipName;
	uint8_t *pCounterAvailabilityImage;
	size_t maxMetricsPerPass;
} CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params;
#define CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, maxMetricsPerPass)

typedef struct {
	size_t structSize;
	void *pPriv;
	CUpti_Profiler_Host_Object *pHostObject;
	const uint8_t *pCounterDataImage;
	size_t counterDataImageSize;
	size_t rangeIndex; /* the sample index for PM sampling */
	const char **ppMetricNames;
	size_t numMetrics;
	double *pMetricValues;
} CUpti_Profiler_Host_EvaluateToGpuValues_Params;
#define CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues)

/* 13.2+ (API 130200), optional; layouts from the docs' member order, not compiled [D]. */
typedef struct {
	size_t structSize;
	void *pPriv;
	const char *pChipName;
	size_t numOfSinglePassSets;
	const char **ppSinglePassSets;
} CUpti_Profiler_Host_GetSinglePassSets_Params;
#define CUpti_Profiler_Host_GetSinglePassSets_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetSinglePassSets_Params, ppSinglePassSets)

typedef struct {
	size_t structSize;
	void *pPriv;
	const char *pChipName;
	const char *pSinglePassSetName;
	size_t numOfMetricsInSinglePassSet;
	size_t metricsBufferSize;
	size_t *pMetricsIndicesBuffer;
	uint8_t *pMetricsBuffer;
} CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params;
#define CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params_STRUCT_SIZE \
	CX_STRUCT_SIZE(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, pMetricsBuffer)

/* 13.2+ (API 130200): CUpti_Profiler_Host_Initialize_Params gains const char *pSinglePassMetricSetName
 * at offset 48 (STRUCT_SIZE 48 -> 56). A separate project type, so the 13.0 struct above keeps its
 * checked layout; send it only to a library of API 130200 or later. */
typedef struct {
	CUpti_Profiler_Host_Initialize_Params v13_0; /* fields 0-40, unchanged */
	const char *pSinglePassMetricSetName;        /* NULL: no set (and always NULL for the range profiler) */
} cx_Host_Initialize_Params_13_2;
#define CX_HOST_INITIALIZE_STRUCT_SIZE_13_2 CX_STRUCT_SIZE(cx_Host_Initialize_Params_13_2, pSinglePassMetricSetName)
_Static_assert(offsetof(cx_Host_Initialize_Params_13_2, pSinglePassMetricSetName) == 48,
	       "pSinglePassMetricSetName must follow the 13.0 fields at offset 48");

/* ---- Functions (resolved with dlsym; never linked) ------------------------------------------- */

typedef CUptiResult (*cx_params_fn)(void *params); /* the shape of every profiler entry point */
typedef CUptiResult (*cx_cuptiGetVersion_fn)(uint32_t *version);
typedef CUptiResult (*cx_cuptiGetResultString_fn)(CUptiResult result, const char **str);
typedef CUptiResult (*cx_cuptiGetTimestamp_fn)(uint64_t *timestamp);

#endif
