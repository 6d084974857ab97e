/*
 * layout_check.c: compares the project's CUPTI declarations (internal/cupti/cupti_decl.h) with
 * the real CUDA headers, struct by struct and field by field: sizeof, every field's offsetof and
 * size, every X_STRUCT_SIZE, a few enum values. Driven by layout_check.sh.
 *
 * One file, three translation units chosen by a macro:
 *   LAYOUT_SIDE_OURS  (gcc, -I internal/cupti)   the project's header  -> layout_ours()
 *   LAYOUT_SIDE_REAL  (g++, -I <cuda>/include)   NVIDIA's headers      -> layout_real()
 *                     (g++: the 13.0 cupti_profiler_host.h includes <string>)
 *   LAYOUT_SIDE_MAIN  (gcc)                      compares and prints; with LAYOUT_SELF it has
 *                     no real side and checks ours against the expected numbers below (the
 *                     13.0 U1 facts of shared/cupti/REFERENCE.md), so CI can run it without CUDA.
 * The two headers declare the same names, so they can never share a translation unit.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef struct {
	char kind; /* 'S' struct: a = sizeof, b = STRUCT_SIZE; 'F' field: a = offset, b = size; 'C' constant: a = value */
	const char *type, *field;
	long a, b;
} layout_row;

/*
 * The checked declarations. S(type, sizeof, STRUCT_SIZE), F(type, field, offset), T(type, sizeof)
 * for plain types, C(name, value) for enum constants. The numbers are the expected 13.0 values.
 */
#define LAYOUT_LIST(S, F, T, C)                                                              \
	T(CUuuid, 16)                                                                        \
	T(CUpti_MetricType, 4)                                                               \
	T(CUpti_ProfilerType, 4)                                                             \
	T(CUpti_Profiler_API, 4)                                                             \
	T(CUpti_Profiler_Support_Level, 4)                                                   \
	T(CUpti_PmSampling_TriggerMode, 4)                                                   \
	T(CUpti_PmSampling_DecodeStopReason, 4)                                              \
	T(CUpti_PmSampling_HardwareBuffer_AppendMode, 4)                                     \
	T(CUptiResult, 4)                                                                    \
	C(CUPTI_METRIC_TYPE_COUNTER, 0)                                                      \
	C(CUPTI_METRIC_TYPE_RATIO, 1)                                                        \
	C(CUPTI_METRIC_TYPE_THROUGHPUT, 2)                                                   \
	C(CUPTI_PROFILER_TYPE_PM_SAMPLING, 1)                                                \
	C(CUPTI_PROFILER_PM_SAMPLING, 3)                                                     \
	C(CUPTI_PROFILER_CONFIGURATION_UNSUPPORTED, 1)                                       \
	C(CUPTI_PROFILER_CONFIGURATION_DISABLED, 2)                                          \
	C(CUPTI_PROFILER_CONFIGURATION_SUPPORTED, 3)                                         \
	C(CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL, 0)                             \
	C(CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL, 1)                               \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_OTHER, 0)                                     \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL, 1)                         \
	C(CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS, 2)                            \
	C(CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST, 0)                      \
	C(CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST, 1)                      \
	S(CUpti_Profiler_Initialize_Params, 16, 16)                                          \
	F(CUpti_Profiler_Initialize_Params, structSize, 0)                                   \
	F(CUpti_Profiler_Initialize_Params, pPriv, 8)                                        \
	S(CUpti_Profiler_DeInitialize_Params, 16, 16)                                        \
	F(CUpti_Profiler_DeInitialize_Params, structSize, 0)                                 \
	F(CUpti_Profiler_DeInitialize_Params, pPriv, 8)                                      \
	S(CUpti_Profiler_DeviceSupported_Params, 56, 52)                                     \
	F(CUpti_Profiler_DeviceSupported_Params, structSize, 0)                              \
	F(CUpti_Profiler_DeviceSupported_Params, pPriv, 8)                                   \
	F(CUpti_Profiler_DeviceSupported_Params, cuDevice, 16)                               \
	F(CUpti_Profiler_DeviceSupported_Params, isSupported, 20)                            \
	F(CUpti_Profiler_DeviceSupported_Params, architecture, 24)                           \
	F(CUpti_Profiler_DeviceSupported_Params, sli, 28)                                    \
	F(CUpti_Profiler_DeviceSupported_Params, vGpu, 32)                                   \
	F(CUpti_Profiler_DeviceSupported_Params, confidentialCompute, 36)                    \
	F(CUpti_Profiler_DeviceSupported_Params, cmp, 40)                                    \
	F(CUpti_Profiler_DeviceSupported_Params, wsl, 44)                                    \
	F(CUpti_Profiler_DeviceSupported_Params, api, 48)                                    \
	S(CUpti_Device_GetChipName_Params, 32, 32)                                           \
	F(CUpti_Device_GetChipName_Params, structSize, 0)                                    \
	F(CUpti_Device_GetChipName_Params, pPriv, 8)                                         \
	F(CUpti_Device_GetChipName_Params, deviceIndex, 16)                                  \
	F(CUpti_Device_GetChipName_Params, pChipName, 24)                                    \
	S(CUpti_PmSampling_GetCounterAvailability_Params, 40, 40)                            \
	F(CUpti_PmSampling_GetCounterAvailability_Params, structSize, 0)                     \
	F(CUpti_PmSampling_GetCounterAvailability_Params, pPriv, 8)                          \
	F(CUpti_PmSampling_GetCounterAvailability_Params, deviceIndex, 16)                   \
	F(CUpti_PmSampling_GetCounterAvailability_Params, counterAvailabilityImageSize, 24)  \
	F(CUpti_PmSampling_GetCounterAvailability_Params, pCounterAvailabilityImage, 32)     \
	S(CUpti_PmSampling_Enable_Params, 32, 32)                                            \
	F(CUpti_PmSampling_Enable_Params, structSize, 0)                                     \
	F(CUpti_PmSampling_Enable_Params, pPriv, 8)                                          \
	F(CUpti_PmSampling_Enable_Params, deviceIndex, 16)                                   \
	F(CUpti_PmSampling_Enable_Params, pPmSamplingObject, 24)                             \
	S(CUpti_PmSampling_SetConfig_Params, 64, 64)                                         \
	F(CUpti_PmSampling_SetConfig_Params, structSize, 0)                                  \
	F(CUpti_PmSampling_SetConfig_Params, pPriv, 8)                                       \
	F(CUpti_PmSampling_SetConfig_Params, pPmSamplingObject, 16)                          \
	F(CUpti_PmSampling_SetConfig_Params, configSize, 24)                                 \
	F(CUpti_PmSampling_SetConfig_Params, pConfig, 32)                                    \
	F(CUpti_PmSampling_SetConfig_Params, hardwareBufferSize, 40)                         \
	F(CUpti_PmSampling_SetConfig_Params, samplingInterval, 48)                           \
	F(CUpti_PmSampling_SetConfig_Params, triggerMode, 56)                                \
	F(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode, 60)                         \
	S(CUpti_PmSampling_GetCounterDataSize_Params, 56, 56)                                \
	F(CUpti_PmSampling_GetCounterDataSize_Params, structSize, 0)                         \
	F(CUpti_PmSampling_GetCounterDataSize_Params, pPriv, 8)                              \
	F(CUpti_PmSampling_GetCounterDataSize_Params, pPmSamplingObject, 16)                 \
	F(CUpti_PmSampling_GetCounterDataSize_Params, pMetricNames, 24)                      \
	F(CUpti_PmSampling_GetCounterDataSize_Params, numMetrics, 32)                        \
	F(CUpti_PmSampling_GetCounterDataSize_Params, maxSamples, 40)                        \
	F(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize, 48)                   \
	S(CUpti_PmSampling_CounterDataImage_Initialize_Params, 40, 40)                       \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, structSize, 0)                \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pPriv, 8)                     \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pPmSamplingObject, 16)        \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, counterDataSize, 24)          \
	F(CUpti_PmSampling_CounterDataImage_Initialize_Params, pCounterData, 32)             \
	S(CUpti_PmSampling_Start_Params, 24, 24)                                             \
	F(CUpti_PmSampling_Start_Params, structSize, 0)                                      \
	F(CUpti_PmSampling_Start_Params, pPriv, 8)                                           \
	F(CUpti_PmSampling_Start_Params, pPmSamplingObject, 16)                              \
	S(CUpti_PmSampling_Stop_Params, 24, 24)                                              \
	F(CUpti_PmSampling_Stop_Params, structSize, 0)                                       \
	F(CUpti_PmSampling_Stop_Params, pPriv, 8)                                            \
	F(CUpti_PmSampling_Stop_Params, pPmSamplingObject, 16)                               \
	S(CUpti_PmSampling_Disable_Params, 24, 24)                                           \
	F(CUpti_PmSampling_Disable_Params, structSize, 0)                                    \
	F(CUpti_PmSampling_Disable_Params, pPriv, 8)                                         \
	F(CUpti_PmSampling_Disable_Params, pPmSamplingObject, 16)                            \
	S(CUpti_PmSampling_DecodeData_Params, 48, 45)                                        \
	F(CUpti_PmSampling_DecodeData_Params, structSize, 0)                                 \
	F(CUpti_PmSampling_DecodeData_Params, pPriv, 8)                                      \
	F(CUpti_PmSampling_DecodeData_Params, pPmSamplingObject, 16)                         \
	F(CUpti_PmSampling_DecodeData_Params, pCounterDataImage, 24)                         \
	F(CUpti_PmSampling_DecodeData_Params, counterDataImageSize, 32)                      \
	F(CUpti_PmSampling_DecodeData_Params, decodeStopReason, 40)                          \
	F(CUpti_PmSampling_DecodeData_Params, overflow, 44)                                  \
	S(CUpti_PmSampling_GetCounterDataInfo_Params, 56, 56)                                \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, structSize, 0)                         \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, pPriv, 8)                              \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, pCounterDataImage, 16)                 \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, counterDataImageSize, 24)              \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, numTotalSamples, 32)                   \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, numPopulatedSamples, 40)               \
	F(CUpti_PmSampling_GetCounterDataInfo_Params, numCompletedSamples, 48)               \
	S(CUpti_PmSampling_CounterData_GetSampleInfo_Params, 64, 64)                         \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, structSize, 0)                  \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pPriv, 8)                       \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pPmSamplingObject, 16)          \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, pCounterDataImage, 24)          \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, counterDataImageSize, 32)       \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, sampleIndex, 40)                \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, startTimestamp, 48)             \
	F(CUpti_PmSampling_CounterData_GetSampleInfo_Params, endTimestamp, 56)               \
	S(CUpti_Profiler_Host_Initialize_Params, 48, 48)                                     \
	F(CUpti_Profiler_Host_Initialize_Params, structSize, 0)                              \
	F(CUpti_Profiler_Host_Initialize_Params, pPriv, 8)                                   \
	F(CUpti_Profiler_Host_Initialize_Params, profilerType, 16)                           \
	F(CUpti_Profiler_Host_Initialize_Params, pChipName, 24)                              \
	F(CUpti_Profiler_Host_Initialize_Params, pCounterAvailabilityImage, 32)              \
	F(CUpti_Profiler_Host_Initialize_Params, pHostObject, 40)                            \
	S(CUpti_Profiler_Host_Deinitialize_Params, 24, 24)                                   \
	F(CUpti_Profiler_Host_Deinitialize_Params, structSize, 0)                            \
	F(CUpti_Profiler_Host_Deinitialize_Params, pPriv, 8)                                 \
	F(CUpti_Profiler_Host_Deinitialize_Params, pHostObject, 16)                          \
	S(CUpti_Profiler_Host_GetSupportedChips_Params, 32, 32)                              \
	F(CUpti_Profiler_Host_GetSupportedChips_Params, structSize, 0)                       \
	F(CUpti_Profiler_Host_GetSupportedChips_Params, pPriv, 8)                            \
	F(CUpti_Profiler_Host_GetSupportedChips_Params, numChips, 16)                        \
	F(CUpti_Profiler_Host_GetSupportedChips_Params, ppChipNames, 24)                     \
	S(CUpti_Profiler_Host_GetBaseMetrics_Params, 48, 48)                                 \
	F(CUpti_Profiler_Host_GetBaseMetrics_Params, structSize, 0)                          \
	F(CUpti_Profiler_Host_GetBaseMetrics_Params, pPriv, 8)                               \
	F(CUpti_Profiler_Host_GetBaseMetrics_Params, pHostObject, 16)                        \
	F(CUpti_Profiler_Host_GetBaseMetrics_Params, metricType, 24)                         \
	F(CUpti_Profiler_Host_GetBaseMetrics_Params, ppMetricNames, 32)                      \
	F(CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics, 40)                         \
	S(CUpti_Profiler_Host_GetSubMetrics_Params, 56, 56)                                  \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, structSize, 0)                           \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, pPriv, 8)                                \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, pHostObject, 16)                         \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, metricType, 24)                          \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, pMetricName, 32)                         \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, numOfSubmetrics, 40)                     \
	F(CUpti_Profiler_Host_GetSubMetrics_Params, ppSubMetrics, 48)                        \
	S(CUpti_Profiler_Host_GetMetricProperties_Params, 64, 60)                            \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, structSize, 0)                     \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, pPriv, 8)                          \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, pHostObject, 16)                   \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, pMetricName, 24)                   \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, pDescription, 32)                  \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, pHwUnit, 40)                       \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, pDimUnit, 48)                      \
	F(CUpti_Profiler_Host_GetMetricProperties_Params, metricType, 56)                    \
	S(CUpti_Profiler_Host_ConfigAddMetrics_Params, 40, 40)                               \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, structSize, 0)                        \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, pPriv, 8)                             \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, pHostObject, 16)                      \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, ppMetricNames, 24)                    \
	F(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics, 32)                       \
	S(CUpti_Profiler_Host_GetConfigImageSize_Params, 32, 32)                             \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, structSize, 0)                      \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, pPriv, 8)                           \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, pHostObject, 16)                    \
	F(CUpti_Profiler_Host_GetConfigImageSize_Params, configImageSize, 24)                \
	S(CUpti_Profiler_Host_GetConfigImage_Params, 40, 40)                                 \
	F(CUpti_Profiler_Host_GetConfigImage_Params, structSize, 0)                          \
	F(CUpti_Profiler_Host_GetConfigImage_Params, pPriv, 8)                               \
	F(CUpti_Profiler_Host_GetConfigImage_Params, pHostObject, 16)                        \
	F(CUpti_Profiler_Host_GetConfigImage_Params, configImageSize, 24)                    \
	F(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage, 32)                       \
	S(CUpti_Profiler_Host_GetNumOfPasses_Params, 40, 40)                                 \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, structSize, 0)                          \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, pPriv, 8)                               \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, configImageSize, 16)                    \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, pConfigImage, 24)                       \
	F(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses, 32)                        \
	S(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, 48, 48)                \
	F(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, structSize, 0)         \
	F(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, pPriv, 8)              \
	F(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, profilerType, 16)      \
	F(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, pChipName, 24)         \
	F(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, pCounterAvailabilityImage, 32) \
	F(CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params, maxMetricsPerPass, 40) \
	S(CUpti_Profiler_Host_EvaluateToGpuValues_Params, 72, 72)                            \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, structSize, 0)                     \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pPriv, 8)                          \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pHostObject, 16)                   \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pCounterDataImage, 24)             \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, counterDataImageSize, 32)          \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, rangeIndex, 40)                    \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, ppMetricNames, 48)                 \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, numMetrics, 56)                    \
	F(CUpti_Profiler_Host_EvaluateToGpuValues_Params, pMetricValues, 64)

/* 13.2+ (CUPTI_API_VERSION >= 130200) only; expected values derived from the docs. */
#define LAYOUT_LIST_132(S, F, T, C)                                                          \
	S(CUpti_Profiler_Host_GetSinglePassSets_Params, 40, 40)                              \
	F(CUpti_Profiler_Host_GetSinglePassSets_Params, pChipName, 16)                       \
	F(CUpti_Profiler_Host_GetSinglePassSets_Params, numOfSinglePassSets, 24)             \
	F(CUpti_Profiler_Host_GetSinglePassSets_Params, ppSinglePassSets, 32)                \
	S(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, 64, 64)                      \
	F(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, pChipName, 16)               \
	F(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, pSinglePassSetName, 24)      \
	F(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, numOfMetricsInSinglePassSet, 32) \
	F(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, metricsBufferSize, 40)       \
	F(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, pMetricsIndicesBuffer, 48)   \
	F(CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params, pMetricsBuffer, 56)

#ifdef __cplusplus
extern "C" {
#endif
const layout_row *layout_ours(size_t *n);
const layout_row *layout_real(size_t *n);
#ifdef __cplusplus
}
#endif

/* ---- the two header sides: rows measured by the compiler ---------------------------------- */

#if defined(LAYOUT_SIDE_OURS) || defined(LAYOUT_SIDE_REAL)

#ifdef LAYOUT_SIDE_OURS
#include "cupti_decl.h"
#define HAVE_132 1
#define LAYOUT_FN layout_ours
#else
#include <cuda.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_pmsampling.h>
#define HAVE_132 (CUPTI_API_VERSION >= 130200)
#define LAYOUT_FN layout_real
#endif

#define ROW_S(t, sz, ss) {'S', #t, "", (long)sizeof(t), (long)(t##_STRUCT_SIZE)},
#define ROW_F(t, f, off) {'F', #t, #f, (long)offsetof(t, f), (long)sizeof(((t *)0)->f)},
#define ROW_T(t, sz) {'S', #t, "", (long)sizeof(t), -1},
#define ROW_C(name, v) {'C', #name, "", (long)(name), 0},

static const layout_row rows[] = {
	LAYOUT_LIST(ROW_S, ROW_F, ROW_T, ROW_C)
#if HAVE_132
	LAYOUT_LIST_132(ROW_S, ROW_F, ROW_T, ROW_C)
#endif
};

#ifdef __cplusplus
extern "C"
#endif
const layout_row *LAYOUT_FN(size_t *n) {
	*n = sizeof rows / sizeof rows[0];
	return rows;
}

#endif

/* ---- the comparison ------------------------------------------------------------------------ */

#ifdef LAYOUT_SIDE_MAIN

#define EXP_S(t, sz, ss) {'S', #t, "", sz, ss},
#define EXP_F(t, f, off) {'F', #t, #f, off, -1},
#define EXP_T(t, sz) {'S', #t, "", sz, -1},
#define EXP_C(name, v) {'C', #name, "", v, 0},
static const layout_row expected[] = {LAYOUT_LIST(EXP_S, EXP_F, EXP_T, EXP_C) LAYOUT_LIST_132(EXP_S, EXP_F, EXP_T, EXP_C)};
#define N_EXPECTED (sizeof expected / sizeof expected[0])

static const layout_row *find(const layout_row *rows, size_t n, const layout_row *key) {
	for (size_t i = 0; i < n; i++)
		if (rows[i].kind == key->kind && !strcmp(rows[i].type, key->type) && !strcmp(rows[i].field, key->field))
			return &rows[i];
	return NULL;
}

static void fmt(char *buf, size_t len, const layout_row *r) {
	if (!r)
		snprintf(buf, len, "-");
	else if (r->kind == 'C')
		snprintf(buf, len, "=%ld", r->a);
	else if (r->kind == 'F' && r->b < 0)
		snprintf(buf, len, "@%ld", r->a);
	else if (r->kind == 'F')
		snprintf(buf, len, "@%ld size %ld", r->a, r->b);
	else if (r->b < 0)
		snprintf(buf, len, "sizeof %ld", r->a);
	else
		snprintf(buf, len, "sizeof %ld, SS %ld", r->a, r->b);
}

int main(void) {
	size_t nours = 0, nreal = 0;
	const layout_row *ours = layout_ours(&nours), *real = NULL;
#ifndef LAYOUT_SELF
	real = layout_real(&nreal);
#endif
	int bad = 0, checked = 0, skipped = 0;
	printf("%-72s %-20s %-20s %-20s %s\n", "declaration", "ours", real ? "real" : "(no real headers)", "expected", "");
	for (size_t i = 0; i < N_EXPECTED; i++) {
		const layout_row *e = &expected[i], *o = find(ours, nours, e), *r = real ? find(real, nreal, e) : NULL;
		char name[160], so[32], sr[32], se[32];
		snprintf(name, sizeof name, "%s%s%s", e->type, e->field[0] ? "." : "", e->field);
		fmt(so, sizeof so, o);
		fmt(sr, sizeof sr, r);
		fmt(se, sizeof se, e);
		const char *status = "ok";
		/* Ours must match the expected figures (offset, sizeof, STRUCT_SIZE, value). */
		int mismatch = !o || o->a != e->a || (e->kind == 'S' && e->b >= 0 && o->b != e->b);
		if (real) {
			if (!r) {
				/* Absent from the real headers: fine only for the 13.2+ additions. */
				if (!strstr(e->type, "SinglePassSet"))
					mismatch = 1;
				else {
					status = "skip (not in these headers)";
					skipped++;
				}
			} else if (o && (o->a != r->a || o->b != r->b))
				mismatch = 1;
		}
		if (mismatch) {
			status = "MISMATCH";
			bad++;
		} else if (strcmp(status, "ok") == 0)
			checked++;
		printf("%-72s %-20s %-20s %-20s %s\n", name, so, sr, se, status);
	}
	printf("\n%d checked, %d skipped, %d mismatched (%s)\n", checked, skipped, bad,
	       real ? "project header vs real CUDA headers" : "self mode: project header vs expected 13.0 figures");
	return bad ? 1 : 0;
}

#endif
