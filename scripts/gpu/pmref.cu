// Reference PM sampler for issue 19 (stage pmcheck): CUPTI's PM Sampling API called directly,
// no exporter code, so its samples are what NVIDIA's own path gives. Every sample is written
// to OUT.tsv (decode number, index in the image, the image's counts, stop reason, start and
// end ns, one value per metric), so the exporter's per-sample statistics can be compared with
// it on the same workload, and the handling of the counter data image can be varied:
//
//   pmref SECONDS INTERVAL_NS DECODE_MS MAX_SAMPLES m1,m2,... OUT.tsv
//
// MAX_SAMPLES is the counter data image's capacity; when a decode stops with
// COUNTER_DATA_FULL the image is replaced by a fresh one of the same capacity (what the
// exporter does), otherwise it is re-initialised. Single pass only (fails otherwise).
// OUT.tsv "-" writes no samples (stage pmcostref: the CPU of the API path alone). At the end
// it prints to stderr the time inside each CUPTI call and the process's CPU (every thread,
// getrusage) from the first decode's sleep to the last decode, both in us a sample.
#include <cuda.h>
#include <cupti_activity.h>
#include <cupti_pmsampling.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <sys/resource.h>

#define CK(x) do { CUptiResult r_ = (x); if (r_ != CUPTI_SUCCESS) { const char* s_; cuptiGetResultString(r_, &s_); \
  fprintf(stderr, "%s:%d %s: %d %s\n", __FILE__, __LINE__, #x, (int)r_, s_); exit(1); } } while (0)

static std::vector<const char*> splitNames(const char* s) {
  std::vector<const char*> v; std::stringstream ss(s); std::string t;
  while (std::getline(ss, t, ',')) if (!t.empty()) v.push_back(strdup(t.c_str()));
  return v;
}

static void initImage(CUpti_PmSampling_Object* obj, std::vector<uint8_t>& cd) {
  CUpti_PmSampling_CounterDataImage_Initialize_Params p{CUpti_PmSampling_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  p.pPmSamplingObject = obj; p.counterDataSize = cd.size(); p.pCounterData = cd.data();
  CK(cuptiPmSamplingCounterDataImageInitialize(&p));
}

int main(int argc, char** argv) {
  if (argc < 7) { fprintf(stderr, "usage: pmref SECONDS INTERVAL_NS DECODE_MS MAX_SAMPLES m1,m2 OUT.tsv\n"); return 2; }
  double secs = atof(argv[1]); uint64_t interval = strtoull(argv[2], nullptr, 10);
  int decodeMs = atoi(argv[3]); uint32_t maxSamples = (uint32_t)atoi(argv[4]);
  std::vector<const char*> m = splitNames(argv[5]);
  bool quiet = std::string(argv[6]) == "-";
  FILE* out = quiet ? nullptr : fopen(argv[6], "w");
  if (!quiet && !out) { perror(argv[6]); return 1; }

  cuInit(0);
  CUpti_Profiler_Initialize_Params ip{CUpti_Profiler_Initialize_Params_STRUCT_SIZE}; CK(cuptiProfilerInitialize(&ip));
  CUpti_Device_GetChipName_Params cn{CUpti_Device_GetChipName_Params_STRUCT_SIZE}; cn.deviceIndex = 0; CK(cuptiDeviceGetChipName(&cn));
  CUpti_PmSampling_GetCounterAvailability_Params ca{CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE}; ca.deviceIndex = 0;
  CK(cuptiPmSamplingGetCounterAvailability(&ca));
  std::vector<uint8_t> avail(ca.counterAvailabilityImageSize); ca.pCounterAvailabilityImage = avail.data();
  CK(cuptiPmSamplingGetCounterAvailability(&ca));

  CUpti_Profiler_Host_Initialize_Params hi{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  hi.profilerType = CUPTI_PROFILER_TYPE_PM_SAMPLING; hi.pChipName = cn.pChipName; hi.pCounterAvailabilityImage = avail.data();
  CK(cuptiProfilerHostInitialize(&hi));
  CUpti_Profiler_Host_Object* host = hi.pHostObject;
  CUpti_Profiler_Host_ConfigAddMetrics_Params am{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  am.pHostObject = host; am.ppMetricNames = m.data(); am.numMetrics = m.size(); CK(cuptiProfilerHostConfigAddMetrics(&am));
  CUpti_Profiler_Host_GetConfigImageSize_Params cs{CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE}; cs.pHostObject = host;
  CK(cuptiProfilerHostGetConfigImageSize(&cs));
  std::vector<uint8_t> cfg(cs.configImageSize);
  CUpti_Profiler_Host_GetConfigImage_Params gc{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
  gc.pHostObject = host; gc.pConfigImage = cfg.data(); gc.configImageSize = cfg.size(); CK(cuptiProfilerHostGetConfigImage(&gc));
  CUpti_Profiler_Host_GetNumOfPasses_Params np{CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  np.pConfigImage = cfg.data(); np.configImageSize = cfg.size(); CK(cuptiProfilerHostGetNumOfPasses(&np));
  if (np.numOfPasses != 1) { fprintf(stderr, "%zu passes: give a single-pass set\n", np.numOfPasses); return 1; }

  CUpti_PmSampling_Enable_Params en{CUpti_PmSampling_Enable_Params_STRUCT_SIZE}; en.deviceIndex = 0; CK(cuptiPmSamplingEnable(&en));
  CUpti_PmSampling_Object* obj = en.pPmSamplingObject;
  CUpti_PmSampling_SetConfig_Params sc{CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE};
  sc.pPmSamplingObject = obj; sc.configSize = cfg.size(); sc.pConfig = cfg.data();
  sc.hardwareBufferSize = 64u << 20; sc.samplingInterval = interval;
  sc.triggerMode = CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL;
  sc.hwBufferAppendMode = CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST;
  CK(cuptiPmSamplingSetConfig(&sc));
  CUpti_PmSampling_GetCounterDataSize_Params ds{CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE};
  ds.pPmSamplingObject = obj; ds.pMetricNames = m.data(); ds.numMetrics = m.size(); ds.maxSamples = maxSamples;
  CK(cuptiPmSamplingGetCounterDataSize(&ds));
  std::vector<uint8_t> cd(ds.counterDataSize);
  initImage(obj, cd);

  uint64_t startNs; CK(cuptiGetTimestamp(&startNs));
  CUpti_PmSampling_Start_Params st{CUpti_PmSampling_Start_Params_STRUCT_SIZE}; st.pPmSamplingObject = obj; CK(cuptiPmSamplingStart(&st));
  if (out) {
    fprintf(out, "# start_ns\t%llu\tchip\t%s\tdecode_ms\t%d\tmax_samples\t%u\n", (unsigned long long)startNs, cn.pChipName, decodeMs, maxSamples);
    fprintf(out, "decode\tindex\tcompleted\tpopulated\tstop\tstart_ns\tend_ns");
    for (auto x : m) fprintf(out, "\t%s", x);
    fprintf(out, "\n");
  }

  std::vector<double> vals(m.size());
  auto cpuNow = [] { rusage ru; getrusage(RUSAGE_SELF, &ru); return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6; };
  using clk = std::chrono::steady_clock;
  auto us = [](clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); };
  double tDecode = 0, tInfo = 0, tSample = 0, tEval = 0, tInit = 0;
  double cpu0 = cpuNow();
  auto t0 = std::chrono::steady_clock::now();
  bool stopped = false;
  long fulls = 0, decodes = 0, samples = 0;
  for (int decode = 0;; decode++) {
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el >= secs && !stopped) { CUpti_PmSampling_Stop_Params sp{CUpti_PmSampling_Stop_Params_STRUCT_SIZE}; sp.pPmSamplingObject = obj; CK(cuptiPmSamplingStop(&sp)); stopped = true; }
    else if (!stopped) std::this_thread::sleep_until(t0 + std::chrono::milliseconds((long)(decode + 1) * decodeMs));
    CUpti_PmSampling_DecodeData_Params dd{CUpti_PmSampling_DecodeData_Params_STRUCT_SIZE};
    dd.pPmSamplingObject = obj; dd.pCounterDataImage = cd.data(); dd.counterDataImageSize = cd.size();
    auto c0 = clk::now();
    CK(cuptiPmSamplingDecodeData(&dd));
    auto c1 = clk::now(); tDecode += us(c0, c1);
    decodes++;
    CUpti_PmSampling_GetCounterDataInfo_Params di{CUpti_PmSampling_GetCounterDataInfo_Params_STRUCT_SIZE};
    di.pCounterDataImage = cd.data(); di.counterDataImageSize = cd.size(); CK(cuptiPmSamplingGetCounterDataInfo(&di));
    tInfo += us(c1, clk::now());
    for (size_t i = 0; i < di.numCompletedSamples; i++) {
      CUpti_PmSampling_CounterData_GetSampleInfo_Params si{CUpti_PmSampling_CounterData_GetSampleInfo_Params_STRUCT_SIZE};
      si.pPmSamplingObject = obj; si.pCounterDataImage = cd.data(); si.counterDataImageSize = cd.size(); si.sampleIndex = i;
      auto s0 = clk::now();
      CK(cuptiPmSamplingCounterDataGetSampleInfo(&si));
      auto s1 = clk::now(); tSample += us(s0, s1);
      CUpti_Profiler_Host_EvaluateToGpuValues_Params ev{CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
      ev.pHostObject = host; ev.pCounterDataImage = cd.data(); ev.counterDataImageSize = cd.size();
      ev.ppMetricNames = m.data(); ev.numMetrics = m.size(); ev.rangeIndex = i; ev.pMetricValues = vals.data();
      CK(cuptiProfilerHostEvaluateToGpuValues(&ev));
      tEval += us(s1, clk::now());
      samples++;
      if (!out) continue;
      fprintf(out, "%d\t%zu\t%zu\t%zu\t%d\t%llu\t%llu", decode, i, di.numCompletedSamples, di.numPopulatedSamples, (int)dd.decodeStopReason,
              (unsigned long long)si.startTimestamp, (unsigned long long)si.endTimestamp);
      for (double v : vals) fprintf(out, "\t%.6g", v);
      fprintf(out, "\n");
    }
    if (dd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_COUNTER_DATA_FULL) {
      fulls++;
      std::vector<uint8_t> fresh(ds.counterDataSize);  // CUPTI refuses to re-initialise a full image
      cd.swap(fresh);
      auto i0 = clk::now();
      initImage(obj, cd);
      tInit += us(i0, clk::now());
      continue;  // decode again at once: records are waiting
    }
    auto i0 = clk::now();
    initImage(obj, cd);
    tInit += us(i0, clk::now());
    if (stopped && dd.decodeStopReason == CUPTI_PM_SAMPLING_DECODE_STOP_REASON_END_OF_RECORDS) break;
    if (stopped && decode > 100000) break;
  }
  double cpu = cpuNow() - cpu0;
  CUpti_PmSampling_Disable_Params dp{CUpti_PmSampling_Disable_Params_STRUCT_SIZE}; dp.pPmSamplingObject = obj; CK(cuptiPmSamplingDisable(&dp));
  if (out) fclose(out);
  fprintf(stderr, "pmref: %ld decodes, %ld samples, %ld full images\n", decodes, samples, fulls);
  double n = samples > 0 ? (double)samples : 1;
  double calls = tDecode + tInfo + tSample + tEval + tInit;
  fprintf(stderr, "pmref cost: process %.1f us/sample, CUPTI calls %.1f (decode %.1f, info %.1f, sample_info %.1f, evaluate %.1f, init %.1f); ratio %.3f\n",
          cpu * 1e6 / n, calls / n, tDecode / n, tInfo / n, tSample / n, tEval / n, tInit / n, cpu * 1e6 / calls);
  return 0;
}
