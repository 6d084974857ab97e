// nvmlcost: what NVML's calls cost the calling thread on GPU 0, the floor under the exporter's
// NVML health and GPM reads (issue 32). Plain C against nvml.h, linked to the driver's
// libnvidia-ml.so.1; built on the GPU machine by stage nvmlcost (stages_gpm.sh).
//
//   nvmlcost calls REPS    every call NVML health makes, and GPM's sample and metrics calls (one
//                          call with 1, 3, 9 and 25 metric ids; 9 calls of one id; samples back to
//                          back and 100 ms apart; with GPM streaming on, when the driver lets it
//                          be set): thread CPU and wall time per call, median and mean of REPS
//   nvmlcost ids REPS      nvmlGpmMetricsGet of each of the exporter's 9 ids alone, and of all
//                          9 but one, over REPS pairs 100 ms apart: which metric costs what
//   nvmlcost shares SECONDS
//                          every second, each process's mean SM share since the last read
//                          (nvmlDeviceGetProcessUtilization, what attribution asks of NVML health)
//                          beside the device's mean GPU utilisation over the same samples' span
//                          (nvmlDeviceGetSamples, GPU_UTILIZATION): whether the second tells a lone
//                          process's share, and both calls' thread CPU
//   nvmlcost viol REPS     the clock-event (violation) counters both ways, REPS rounds 1 s apart:
//                          nvmlDeviceGetViolationStatus per policy (deprecated in 13.0, to be removed
//                          in 14.0) beside the field values nvml.h names as its translations, and
//                          the energy both ways: each value and return code, so the two can be
//                          matched, and the thread CPU of either way
//   nvmlcost floor SECONDS PERIOD_MS NIDS
//                          what gpm.mode=only asks of NVML: every PERIOD_MS one nvmlGpmSampleGet
//                          and one nvmlGpmMetricsGet of the exporter's NIDS first ids (9: what it
//                          asks on a GPU without NVLink peers), nothing else; prints the process's
//                          CPU and per call, so the exporter's CPU can be set beside it
//
// Thread CPU is CLOCK_THREAD_CPUTIME_ID around each call: the user and kernel time NVML spends
// on this thread (a driver call that polls for the GPU's firmware counts; one that sleeps does
// not, and shows as wall time).
#include <nvml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

static nvmlDevice_t dev;

static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_ms(double ms) {
  struct timespec t = {(time_t)(ms / 1000), (long)((ms - 1000 * (long)(ms / 1000)) * 1e6)};
  nanosleep(&t, NULL);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// report prints "name: cpu median/mean us, wall median/mean us, rc" of n timings.
static void report(const char *name, double *cpu, double *wall, int n, nvmlReturn_t rc) {
  double sc = 0, sw = 0;
  for (int i = 0; i < n; i++) sc += cpu[i], sw += wall[i];
  qsort(cpu, n, sizeof *cpu, cmp);
  qsort(wall, n, sizeof *wall, cmp);
  printf("%-44s cpu_us median %8.1f mean %8.1f  wall_us median %8.1f mean %8.1f  n %d rc %d (%s)\n", name,
         cpu[n / 2] * 1e6, sc / n * 1e6, wall[n / 2] * 1e6, sw / n * 1e6, n, rc, nvmlErrorString(rc));
  fflush(stdout);
}

// Each health read as one function: what health/device.go's collection calls.
static nvmlReturn_t c_mem(void) { nvmlMemory_v2_t m = {.version = nvmlMemory_v2}; return nvmlDeviceGetMemoryInfo_v2(dev, &m); }
static nvmlReturn_t c_enc(void) { unsigned u, p; return nvmlDeviceGetEncoderUtilization(dev, &u, &p); }
static nvmlReturn_t c_dec(void) { unsigned u, p; return nvmlDeviceGetDecoderUtilization(dev, &u, &p); }
static nvmlReturn_t c_bar1(void) { nvmlBAR1Memory_t m; return nvmlDeviceGetBAR1MemoryInfo(dev, &m); }
static nvmlReturn_t c_util(void) { nvmlUtilization_t u; return nvmlDeviceGetUtilizationRates(dev, &u); }
static nvmlReturn_t c_power(void) { unsigned mw; return nvmlDeviceGetPowerUsage(dev, &mw); }
static nvmlReturn_t c_plimit(void) { unsigned mw; return nvmlDeviceGetEnforcedPowerLimit(dev, &mw); }
static nvmlReturn_t c_energy(void) { unsigned long long mj; return nvmlDeviceGetTotalEnergyConsumption(dev, &mj); }
static nvmlReturn_t c_temp(void) { unsigned c; return nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &c); }
static nvmlReturn_t c_memtemp(void) {
  nvmlFieldValue_t f = {.fieldId = NVML_FI_DEV_MEMORY_TEMP};
  nvmlReturn_t r = nvmlDeviceGetFieldValues(dev, 1, &f);
  return r != NVML_SUCCESS ? r : f.nvmlReturn;
}
static nvmlReturn_t c_clock_sm(void) { unsigned v; return nvmlDeviceGetClockInfo(dev, NVML_CLOCK_SM, &v); }
static nvmlReturn_t c_clock_mem(void) { unsigned v; return nvmlDeviceGetClockInfo(dev, NVML_CLOCK_MEM, &v); }
static nvmlReturn_t c_clock_gr(void) { unsigned v; return nvmlDeviceGetClockInfo(dev, NVML_CLOCK_GRAPHICS, &v); }
static nvmlReturn_t c_maxclock_sm(void) { unsigned v; return nvmlDeviceGetMaxClockInfo(dev, NVML_CLOCK_SM, &v); }
static nvmlReturn_t c_maxclock_mem(void) { unsigned v; return nvmlDeviceGetMaxClockInfo(dev, NVML_CLOCK_MEM, &v); }
static nvmlReturn_t c_maxclock_gr(void) { unsigned v; return nvmlDeviceGetMaxClockInfo(dev, NVML_CLOCK_GRAPHICS, &v); }
static nvmlReturn_t c_events(void) { unsigned long long m; return nvmlDeviceGetCurrentClocksEventReasons(dev, &m); }
static nvmlReturn_t viol(nvmlPerfPolicyType_t p) { nvmlViolationTime_t v; return nvmlDeviceGetViolationStatus(dev, p, &v); }
static nvmlReturn_t c_viol_power(void) { return viol(NVML_PERF_POLICY_POWER); }
static nvmlReturn_t c_viol_thermal(void) { return viol(NVML_PERF_POLICY_THERMAL); }
static nvmlReturn_t c_viol_sync(void) { return viol(NVML_PERF_POLICY_SYNC_BOOST); }
static nvmlReturn_t c_viol_board(void) { return viol(NVML_PERF_POLICY_BOARD_LIMIT); }
static nvmlReturn_t c_viol_lowutil(void) { return viol(NVML_PERF_POLICY_LOW_UTILIZATION); }
static nvmlReturn_t c_viol_rel(void) { return viol(NVML_PERF_POLICY_RELIABILITY); }
static nvmlReturn_t c_viol_app(void) { return viol(NVML_PERF_POLICY_TOTAL_APP_CLOCKS); }
static nvmlReturn_t c_viol_base(void) { return viol(NVML_PERF_POLICY_TOTAL_BASE_CLOCKS); }
// The energy and the 8 violation counters as field values in one call, and the violations alone:
// whether the driver answers a batch cheaper than 9 calls (health reads them every 10 s).
static nvmlReturn_t fields(const unsigned *ids, unsigned n) {
  nvmlFieldValue_t f[16] = {0};
  for (unsigned i = 0; i < n; i++) f[i].fieldId = ids[i];
  nvmlReturn_t r = nvmlDeviceGetFieldValues(dev, (int)n, f);
  for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++)
    if (f[i].nvmlReturn != NVML_SUCCESS) r = f[i].nvmlReturn;
  return r;
}
static const unsigned violFields[] = {74, 75, 76, 77, 78, 79, 80, 81};  // NVML_FI_DEV_PERF_POLICY_*
static nvmlReturn_t c_fields_viol(void) { return fields(violFields, 8); }
static nvmlReturn_t c_fields_viol_energy(void) {
  static const unsigned ids[] = {74, 75, 76, 77, 78, 79, 80, 81, 83};  // + TOTAL_ENERGY_CONSUMPTION
  return fields(ids, 9);
}
static nvmlReturn_t c_fields_exporter(void) {  // health's clock-event read (health/device.go)
  static const unsigned ids[] = {74, 269, 76, 77, 78, 79, 80, 81, 270, 271};
  return fields(ids, 10);
}
static nvmlReturn_t c_fields_energy(void) { static const unsigned ids[] = {83}; return fields(ids, 1); }
static nvmlReturn_t c_procs(void) { nvmlProcessInfo_t p[64]; unsigned n = 64; return nvmlDeviceGetComputeRunningProcesses(dev, &n, p); }
static nvmlReturn_t c_mps(void) { nvmlProcessInfo_t p[64]; unsigned n = 64; return nvmlDeviceGetMPSComputeRunningProcesses(dev, &n, p); }
static unsigned long long util_seen;
static nvmlReturn_t c_procutil(void) {
  nvmlProcessUtilizationSample_t s[256];
  unsigned n = 256;
  nvmlReturn_t r = nvmlDeviceGetProcessUtilization(dev, s, &n, util_seen);
  for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++)
    if (s[i].timeStamp > util_seen) util_seen = s[i].timeStamp;
  return r;
}
// go-nvml's GetProcessUtilization asks for the size first (a NULL buffer: NVML answers
// INSUFFICIENT_SIZE with the count), then reads: what that first call costs alone, and the v1
// call that takes the caller's buffer in one call.
static nvmlReturn_t c_procutil_size(void) {
  unsigned n = 0;
  nvmlReturn_t r = nvmlDeviceGetProcessUtilization(dev, NULL, &n, util_seen);
  return r == NVML_ERROR_INSUFFICIENT_SIZE ? NVML_SUCCESS : r;
}
static nvmlReturn_t c_procsinfo(void) {
  static nvmlProcessUtilizationInfo_v1_t s[256];
  nvmlProcessesUtilizationInfo_t p = {.version = nvmlProcessesUtilizationInfo_v1, .processSamplesCount = 256,
                                      .lastSeenTimeStamp = util_seen, .procUtilArray = s};
  return nvmlDeviceGetProcessesUtilizationInfo(dev, &p);
}
static unsigned long long gpu_seen;
static nvmlSample_t gpu_samples[1024];
static unsigned gpu_n;
static nvmlReturn_t c_gpusamples(void) {
  nvmlValueType_t t;
  gpu_n = 1024;
  nvmlReturn_t r = nvmlDeviceGetSamples(dev, NVML_GPU_UTILIZATION_SAMPLES, gpu_seen, &t, &gpu_n, gpu_samples);
  for (unsigned i = 0; r == NVML_SUCCESS && i < gpu_n; i++)
    if (gpu_samples[i].timeStamp > gpu_seen) gpu_seen = gpu_samples[i].timeStamp;
  return r;
}
static nvmlReturn_t c_mig(void) { unsigned cur, pend; return nvmlDeviceGetMigMode(dev, &cur, &pend); }
static nvmlReturn_t c_ecc(void) { unsigned long long n; return nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n); }
static nvmlReturn_t c_remap(void) { unsigned a, b, c, d; return nvmlDeviceGetRemappedRows(dev, &a, &b, &c, &d); }
static nvmlReturn_t c_replay(void) { unsigned n; return nvmlDeviceGetPcieReplayCounter(dev, &n); }
static nvmlReturn_t c_nvlink(void) { nvmlEnableState_t s; return nvmlDeviceGetNvLinkState(dev, 0, &s); }

static const struct {
  const char *name;
  nvmlReturn_t (*f)(void);
} health[] = {
    {"GetMemoryInfo_v2", c_mem}, {"GetEncoderUtilization", c_enc}, {"GetDecoderUtilization", c_dec},
    {"GetBAR1MemoryInfo", c_bar1}, {"GetUtilizationRates", c_util}, {"GetPowerUsage", c_power},
    {"GetEnforcedPowerLimit", c_plimit}, {"GetTotalEnergyConsumption", c_energy}, {"GetTemperature", c_temp},
    {"GetFieldValues(MEMORY_TEMP)", c_memtemp}, {"GetClockInfo(SM)", c_clock_sm}, {"GetClockInfo(MEM)", c_clock_mem},
    {"GetClockInfo(GRAPHICS)", c_clock_gr}, {"GetMaxClockInfo(SM)", c_maxclock_sm},
    {"GetMaxClockInfo(MEM)", c_maxclock_mem}, {"GetMaxClockInfo(GRAPHICS)", c_maxclock_gr},
    {"GetCurrentClocksEventReasons", c_events}, {"GetViolationStatus(POWER)", c_viol_power},
    {"GetViolationStatus(THERMAL)", c_viol_thermal}, {"GetViolationStatus(SYNC_BOOST)", c_viol_sync},
    {"GetViolationStatus(BOARD_LIMIT)", c_viol_board}, {"GetViolationStatus(LOW_UTILIZATION)", c_viol_lowutil},
    {"GetViolationStatus(RELIABILITY)", c_viol_rel}, {"GetViolationStatus(TOTAL_APP_CLOCKS)", c_viol_app},
    {"GetViolationStatus(TOTAL_BASE_CLOCKS)", c_viol_base}, {"GetFieldValues(8 PERF_POLICY)", c_fields_viol},
    {"GetFieldValues(8 PERF_POLICY + ENERGY)", c_fields_viol_energy}, {"GetFieldValues(ENERGY)", c_fields_energy},
    {"GetFieldValues(health's 10 clock-event ids)", c_fields_exporter},
    {"GetComputeRunningProcesses", c_procs},
    {"GetMPSComputeRunningProcesses", c_mps}, {"GetProcessUtilization", c_procutil},
    {"GetProcessUtilization size query (NULL buffer)", c_procutil_size}, {"GetProcessesUtilizationInfo (v1, one call)", c_procsinfo},
    {"GetSamples(GPU_UTILIZATION)", c_gpusamples}, {"GetMigMode", c_mig},
    {"GetTotalEccErrors (every 10 s)", c_ecc}, {"GetRemappedRows (every 10 s)", c_remap},
    {"GetPcieReplayCounter (every 10 s)", c_replay}, {"GetNvLinkState (every 10 s)", c_nvlink},
};

// The exporter's GPM ids (gpmsource/metrics.go, no NVLink peers) first, then gpmprobe's others.
static const unsigned ids[] = {10, 1, 2, 5, 11, 12, 13, 21, 20, 3, 4, 6, 7, 8, 9, 60, 61, 248, 249, 250, 255, 256, 258, 259, 260};
static nvmlGpmMetricsGet_t mg;

static nvmlReturn_t metrics(nvmlGpmSample_t a, nvmlGpmSample_t b, int from, int n) {
  mg.version = NVML_GPM_METRICS_GET_VERSION;
  mg.numMetrics = n;
  mg.sample1 = a;
  mg.sample2 = b;
  for (int i = 0; i < n; i++) mg.metrics[i].metricId = ids[from + i];
  return nvmlGpmMetricsGet(&mg);
}

// gpm times, over reps pairs taken period_ms apart (0: back to back), the sample call and the
// metrics call with 1, 3, 9 and 25 ids and as 9 calls of one id.
static void gpm(int reps, double period_ms, const char *tag) {
  nvmlGpmSample_t s[2];
  if (nvmlGpmSampleAlloc(&s[0]) != NVML_SUCCESS || nvmlGpmSampleAlloc(&s[1]) != NVML_SUCCESS) {
    printf("gpm sample alloc failed\n");
    return;
  }
  enum { SAMPLE, M1, M3, M9, M25, M9X1, K };
  static const char *names[K] = {"GpmSampleGet", "GpmMetricsGet 1 id", "GpmMetricsGet 3 ids", "GpmMetricsGet 9 ids",
                                 "GpmMetricsGet 25 ids", "GpmMetricsGet 9 calls of 1 id"};
  double *cpu[K], *wall[K];
  nvmlReturn_t rc[K] = {0};
  for (int k = 0; k < K; k++) cpu[k] = calloc(reps, sizeof(double)), wall[k] = calloc(reps, sizeof(double));
  nvmlGpmSampleGet(dev, s[0]);
  for (int i = 0; i < reps; i++) {
    if (period_ms > 0) sleep_ms(period_ms);
    nvmlGpmSample_t a = s[i % 2], b = s[(i + 1) % 2];
    for (int k = 0; k < K; k++) {
      double c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
      switch (k) {
        case SAMPLE: rc[k] = nvmlGpmSampleGet(dev, b); break;
        case M1: rc[k] = metrics(a, b, 0, 1); break;
        case M3: rc[k] = metrics(a, b, 0, 3); break;
        case M9: rc[k] = metrics(a, b, 0, 9); break;
        case M25: rc[k] = metrics(a, b, 0, 25); break;
        case M9X1:
          for (int j = 0; j < 9; j++) rc[k] = metrics(a, b, j, 1);
          break;
      }
      cpu[k][i] = now(CLOCK_THREAD_CPUTIME_ID) - c0;
      wall[k][i] = now(CLOCK_MONOTONIC) - w0;
    }
  }
  char name[96];
  for (int k = 0; k < K; k++) {
    snprintf(name, sizeof name, "%s (%s)", names[k], tag);
    report(name, cpu[k], wall[k], reps, rc[k]);
    free(cpu[k]), free(wall[k]);
  }
  nvmlGpmSampleFree(s[0]), nvmlGpmSampleFree(s[1]);
}

// ids times, over reps pairs 100 ms apart, a metrics call of each of the first 9 ids alone,
// then of the 9 without each one.
static int per_id(int reps) {
  nvmlGpmSample_t s[2];
  if (nvmlGpmSampleAlloc(&s[0]) != NVML_SUCCESS || nvmlGpmSampleAlloc(&s[1]) != NVML_SUCCESS) return 1;
  enum { N = 9 };
  double *cpu[2 * N], *wall[2 * N];
  nvmlReturn_t rc[2 * N] = {0};
  for (int k = 0; k < 2 * N; k++) cpu[k] = calloc(reps, sizeof(double)), wall[k] = calloc(reps, sizeof(double));
  nvmlGpmSampleGet(dev, s[0]);
  for (int i = 0; i < reps; i++) {
    sleep_ms(100);
    nvmlGpmSample_t a = s[i % 2], b = s[(i + 1) % 2];
    nvmlGpmSampleGet(dev, b);
    for (int k = 0; k < 2 * N; k++) {
      double c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
      if (k < N) {
        rc[k] = metrics(a, b, k, 1);
      } else { // all but id k - N
        mg.version = NVML_GPM_METRICS_GET_VERSION;
        mg.numMetrics = N - 1;
        mg.sample1 = a;
        mg.sample2 = b;
        for (int j = 0, n = 0; j < N; j++)
          if (j != k - N) mg.metrics[n++].metricId = ids[j];
        rc[k] = nvmlGpmMetricsGet(&mg);
      }
      cpu[k][i] = now(CLOCK_THREAD_CPUTIME_ID) - c0;
      wall[k][i] = now(CLOCK_MONOTONIC) - w0;
    }
  }
  char name[96];
  for (int k = 0; k < 2 * N; k++) {
    snprintf(name, sizeof name, k < N ? "GpmMetricsGet id %u alone" : "GpmMetricsGet the 9 without id %u", ids[k % N]);
    report(name, cpu[k], wall[k], reps, rc[k]);
    free(cpu[k]), free(wall[k]);
  }
  nvmlGpmSampleFree(s[0]), nvmlGpmSampleFree(s[1]);
  return 0;
}

static int calls(int reps) {
  double *cpu = calloc(reps, sizeof(double)), *wall = calloc(reps, sizeof(double));
  for (size_t h = 0; h < sizeof health / sizeof health[0]; h++) {
    nvmlReturn_t rc = NVML_SUCCESS;
    for (int i = 0; i < reps; i++) {
      sleep_ms(5);
      double c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
      rc = health[h].f();
      cpu[i] = now(CLOCK_THREAD_CPUTIME_ID) - c0;
      wall[i] = now(CLOCK_MONOTONIC) - w0;
    }
    report(health[h].name, cpu, wall, reps, rc);
  }
  free(cpu), free(wall);
  nvmlGpmSupport_t sup = {.version = NVML_GPM_SUPPORT_VERSION};
  if (nvmlGpmQueryDeviceSupport(dev, &sup) != NVML_SUCCESS || !sup.isSupportedDevice) {
    printf("GPM not supported\n");
    return 0;
  }
  unsigned streaming = 0;
  nvmlReturn_t qr = nvmlGpmQueryIfStreamingEnabled(dev, &streaming);
  printf("# GPM streaming %u (%s)\n", streaming, nvmlErrorString(qr));
  gpm(reps, 0, "back to back");
  gpm(reps, 100, "100 ms apart");
  if (!streaming) {
    nvmlReturn_t sr = nvmlGpmSetStreamingEnabled(dev, 1);
    printf("# set GPM streaming on: %s\n", nvmlErrorString(sr));
    if (sr == NVML_SUCCESS) {
      gpm(reps, 100, "100 ms apart, streaming on");
      printf("# set GPM streaming off again: %s\n", nvmlErrorString(nvmlGpmSetStreamingEnabled(dev, 0)));
    }
  }
  return 0;
}

// shares: every second, the per-process SM shares since the last read beside the device's GPU
// utilisation samples since the last read, and what each call cost the thread.
static int shares(double secs) {
  static nvmlProcessUtilizationSample_t ps[512];
  double w0 = now(CLOCK_MONOTONIC);
  c_gpusamples();
  unsigned n = 512;
  nvmlDeviceGetProcessUtilization(dev, ps, &n, 0);
  for (unsigned i = 0; i < n; i++)
    if (ps[i].timeStamp > util_seen) util_seen = ps[i].timeStamp;
  while (now(CLOCK_MONOTONIC) - w0 < secs) {
    sleep_ms(1000);
    double c0 = now(CLOCK_THREAD_CPUTIME_ID);
    unsigned long long since = util_seen;
    n = 512;
    nvmlReturn_t rp = nvmlDeviceGetProcessUtilization(dev, ps, &n, since);
    double c1 = now(CLOCK_THREAD_CPUTIME_ID);
    nvmlReturn_t rg = c_gpusamples();
    double c2 = now(CLOCK_THREAD_CPUTIME_ID);
    printf("t=%.1f procutil rc %d cpu %.0f us:", now(CLOCK_MONOTONIC) - w0, rp, (c1 - c0) * 1e6);
    unsigned pids[16], np = 0;
    for (unsigned i = 0; rp == NVML_SUCCESS && i < n; i++) {
      if (ps[i].timeStamp <= since) continue;
      if (ps[i].timeStamp > util_seen) util_seen = ps[i].timeStamp;
      unsigned k = 0;
      while (k < np && pids[k] != ps[i].pid) k++;
      if (k == np && np < 16) pids[np++] = ps[i].pid;
    }
    for (unsigned k = 0; k < np; k++) {
      double sum = 0;
      unsigned c = 0;
      unsigned long long lo = ~0ULL, hi = 0;
      for (unsigned i = 0; i < n; i++)
        if (ps[i].pid == pids[k] && ps[i].timeStamp > since) {
          sum += ps[i].smUtil, c++;
          if (ps[i].timeStamp < lo) lo = ps[i].timeStamp;
          if (ps[i].timeStamp > hi) hi = ps[i].timeStamp;
        }
      printf(" pid %u sm %.1f %% (%u samples, ts %llu..%llu)", pids[k], sum / c, c, lo, hi);
    }
    double sum = 0;
    unsigned long long lo = ~0ULL, hi = 0;
    for (unsigned i = 0; rg == NVML_SUCCESS && i < gpu_n; i++) {
      sum += gpu_samples[i].sampleValue.uiVal;
      if (gpu_samples[i].timeStamp < lo) lo = gpu_samples[i].timeStamp;
      if (gpu_samples[i].timeStamp > hi) hi = gpu_samples[i].timeStamp;
    }
    printf(" | device gpu util rc %d cpu %.0f us: %.1f %% (%u samples, ts %llu..%llu)\n", rg, (c2 - c1) * 1e6,
           gpu_n ? sum / gpu_n : -1.0, gpu_n, lo, hi);
    fflush(stdout);
  }
  return 0;
}

static double proc_cpu(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// floor: the NVML calls of gpm.mode=only on one GPU and nothing else, on a fixed schedule.
static int floor_run(double secs, double period_ms, int nids) {
  nvmlGpmSample_t s[2];
  if (nvmlGpmSampleAlloc(&s[0]) != NVML_SUCCESS || nvmlGpmSampleAlloc(&s[1]) != NVML_SUCCESS) return 1;
  double c0 = proc_cpu(), w0 = now(CLOCK_MONOTONIC), next = w0, cs = 0, cm = 0;
  int pairs = 0, fails = 0;
  nvmlGpmSampleGet(dev, s[0]);
  for (int i = 1; now(CLOCK_MONOTONIC) - w0 < secs; i++) {
    next += period_ms / 1000;
    double wait = next - now(CLOCK_MONOTONIC);
    if (wait > 0) sleep_ms(wait * 1000);
    double t0 = now(CLOCK_THREAD_CPUTIME_ID);
    nvmlReturn_t r = nvmlGpmSampleGet(dev, s[i % 2]);
    double t1 = now(CLOCK_THREAD_CPUTIME_ID);
    if (r == NVML_SUCCESS) r = metrics(s[(i + 1) % 2], s[i % 2], 0, nids);
    double t2 = now(CLOCK_THREAD_CPUTIME_ID);
    cs += t1 - t0, cm += t2 - t1;
    if (r == NVML_SUCCESS) pairs++; else fails++;
  }
  double cpu = proc_cpu() - c0, wall = now(CLOCK_MONOTONIC) - w0;
  printf("floor: %d pairs (%d failed) in %.1f s, period %.0f ms, %d ids: process CPU %.4f s = %.3f %% of a core, "
         "%.1f us a pair (sample %.1f, metrics %.1f)\n",
         pairs, fails, wall, period_ms, nids, cpu, 100 * cpu / wall, cpu / (pairs + fails) * 1e6,
         cs / (pairs + fails) * 1e6, cm / (pairs + fails) * 1e6);
  return 0;
}

// viol prints, REPS rounds 1 s apart, each policy's violation time by the old call and by the
// field nvml.h translates it to (and the fields with no old call), and what each way cost.
static int viol_compare(int reps) {
  static const struct { const char *name; int policy; unsigned field; } t[] = {
      {"power", NVML_PERF_POLICY_POWER, 74}, {"thermal", NVML_PERF_POLICY_THERMAL, 269},
      {"thermal(75)", NVML_PERF_POLICY_THERMAL, 75}, {"sync_boost", NVML_PERF_POLICY_SYNC_BOOST, 76},
      {"board_limit", NVML_PERF_POLICY_BOARD_LIMIT, 77}, {"low_utilization", NVML_PERF_POLICY_LOW_UTILIZATION, 78},
      {"reliability", NVML_PERF_POLICY_RELIABILITY, 79}, {"app_clocks", NVML_PERF_POLICY_TOTAL_APP_CLOCKS, 80},
      {"base_clocks", NVML_PERF_POLICY_TOTAL_BASE_CLOCKS, 81}, {"hw_thermal", -1, 270}, {"hw_power_brake", -1, 271},
      {"energy_mJ", -2, 83},
  };
  enum { N = sizeof t / sizeof t[0] };
  for (int round = 0; round < reps; round++) {
    if (round) sleep_ms(1000);
    nvmlFieldValue_t f[N] = {0};
    for (int i = 0; i < N; i++) f[i].fieldId = t[i].field;
    double c0 = now(CLOCK_THREAD_CPUTIME_ID);
    nvmlReturn_t fr = nvmlDeviceGetFieldValues(dev, N, f);
    double c1 = now(CLOCK_THREAD_CPUTIME_ID);
    unsigned long long old[N] = {0};
    nvmlReturn_t orc[N];
    for (int i = 0; i < N; i++) {
      orc[i] = NVML_ERROR_NOT_SUPPORTED;
      if (t[i].policy >= 0) {
        nvmlViolationTime_t v;
        if ((orc[i] = nvmlDeviceGetViolationStatus(dev, (nvmlPerfPolicyType_t)t[i].policy, &v)) == NVML_SUCCESS) old[i] = v.violationTime;
      } else if (t[i].policy == -2) {
        orc[i] = nvmlDeviceGetTotalEnergyConsumption(dev, &old[i]);
      }
    }
    double c2 = now(CLOCK_THREAD_CPUTIME_ID);
    printf("viol round %d: fields call rc=%d %.3f ms for %d ids; old calls %.3f ms\n", round, fr, (c1 - c0) * 1e3, N, (c2 - c1) * 1e3);
    for (int i = 0; i < N; i++)
      printf("  %-16s field %3u rc=%d type=%d value=%llu | old rc=%d value=%llu\n", t[i].name, t[i].field, f[i].nvmlReturn,
             f[i].valueType, f[i].value.ullVal, orc[i], old[i]);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: nvmlcost calls REPS | nvmlcost ids REPS | nvmlcost shares SECONDS | nvmlcost viol REPS | nvmlcost floor SECONDS PERIOD_MS NIDS\n");
    return 2;
  }
  nvmlReturn_t r = nvmlInit();
  if (r != NVML_SUCCESS) {
    fprintf(stderr, "nvmlInit: %s\n", nvmlErrorString(r));
    return 1;
  }
  if ((r = nvmlDeviceGetHandleByIndex(0, &dev)) != NVML_SUCCESS) {
    fprintf(stderr, "GPU 0: %s\n", nvmlErrorString(r));
    return 1;
  }
  int rc = !strcmp(argv[1], "calls") ? calls(atoi(argv[2]))
           : !strcmp(argv[1], "ids")  ? per_id(atoi(argv[2]))
           : !strcmp(argv[1], "shares") ? shares(atof(argv[2]))
           : !strcmp(argv[1], "viol")   ? viol_compare(atoi(argv[2]))
           : !strcmp(argv[1], "floor") && argc > 4 ? floor_run(atof(argv[2]), atof(argv[3]), atoi(argv[4]))
                                                  : 2;
  nvmlShutdown();
  return rc;
}
