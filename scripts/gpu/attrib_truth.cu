// Ground truth for the attribution join (scripts/gpu/stages.sh, stage attrib): kernels whose DRAM
// traffic is known, interleaved with kernels that have none, for a given time.
//
//   attrib_truth SECONDS INTERVAL_US SEED OUT.json [SPIN_SHARE]
//
// SPIN_SHARE (default 0.3) is the chance a launch is a spin kernel. Built with -DKPFX=alt_
// every kernel name gets that prefix (the same work under other names: stage
// attrib_untraced runs a traced and an untraced process with the same and with different
// names).
// Each read_rX kernel reads exactly its byte count once from device memory (fresh data: a cursor
// walks a 12 GiB buffer, far larger than the 50 MB L2) and writes one float per block; its size is
// chosen so it lasts about X sample intervals (X = 0.2 ... 20, calibrated at start). spin keeps
// every SM busy for a random time with no memory traffic. Kernels are launched back to back with
// random idle gaps, so samples straddle kernel edges, kernel-kernel boundaries and gaps. Two of
// these at once on one GPU time-slice. The JSON lists, per kernel name, launches, bytes read and
// the GPU time from CUDA events.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

#ifndef KPFX
#define KPFX
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(x) #x
#define STR(x) STR_(x)
#define K(x) CAT(KPFX, x)

// Every read kernel has the same body; distinct names make distinct attribution classes.
#define READ_KERNEL(NAME)                                                                  \
  extern "C" __global__ void NAME(const float4* __restrict__ p, size_t n, float* out) {    \
    float acc = 0.f;                                                                       \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;                  \
         i += (size_t)gridDim.x * blockDim.x) {                                            \
      float4 v = __ldcs(p + i);                                                            \
      acc += v.x + v.y + v.z + v.w;                                                        \
    }                                                                                      \
    if (acc == 1.2345f) out[blockIdx.x] = acc; /* never true: keeps the loads alive */     \
  }
READ_KERNEL(K(read_r0p2))
READ_KERNEL(K(read_r0p5))
READ_KERNEL(K(read_r1))
READ_KERNEL(K(read_r2))
READ_KERNEL(K(read_r5))
READ_KERNEL(K(read_r10))
READ_KERNEL(K(read_r20))

extern "C" __global__ void K(spin)(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
  }
}

typedef void (*ReadFn)(const float4*, size_t, float*);
struct Class { const char* name; ReadFn fn; double ratio; size_t n4; long long launches; double bytes, ms; };

int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "usage: %s SECONDS INTERVAL_US SEED OUT.json [SPIN_SHARE]\n", argv[0]); return 2; }
  double secs = atof(argv[1]), interval_us = atof(argv[2]);
  double spinShare = argc > 5 ? atof(argv[5]) : 0.3;
  std::mt19937_64 rng(strtoull(argv[3], nullptr, 10));
  const size_t bufBytes = 12ull << 30, buf4 = bufBytes / 16;
  float4* buf; float* out;
  CK(cudaMalloc(&buf, bufBytes)); CK(cudaMalloc(&out, 1 << 20));
  CK(cudaMemset(buf, 0, bufBytes));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = sms * 4, block = 512;
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));

  // Calibrate the read bandwidth on 2 GiB of cold data.
  size_t cal4 = (2ull << 30) / 16; float ms = 0;
  for (int i = 0; i < 3; i++) {
    CK(cudaEventRecord(e0)); K(read_r1)<<<grid, block>>>(buf + (size_t)i * cal4, cal4, out); CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1));
  }
  double bw = cal4 * 16.0 / (ms / 1e3);  // bytes per second
  Class cls[] = {{STR(K(read_r0p2)), K(read_r0p2), 0.2}, {STR(K(read_r0p5)), K(read_r0p5), 0.5},
                 {STR(K(read_r1)), K(read_r1), 1}, {STR(K(read_r2)), K(read_r2), 2}, {STR(K(read_r5)), K(read_r5), 5},
                 {STR(K(read_r10)), K(read_r10), 10}, {STR(K(read_r20)), K(read_r20), 20}};
  const int ncls = sizeof(cls) / sizeof(cls[0]);
  for (auto& c : cls) {
    size_t n = (size_t)(c.ratio * interval_us * 1e-6 * bw / 16);
    n = (n + grid * block - 1) / (grid * block) * (grid * block);  // whole grid strides
    if (n > buf4 / 2) n = buf4 / 2;
    c.n4 = n; c.launches = 0; c.bytes = 0; c.ms = 0;
  }
  long long spins = 0; double spinMs = 0;
  std::uniform_real_distribution<double> u(0, 1);
  size_t cursor = 0;
  auto t0 = std::chrono::steady_clock::now();
  // Launch in rounds of a few kernels; time each kernel with events, read them after the round.
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < secs) {
    struct Timed { int c; cudaEvent_t a, b; };
    std::vector<Timed> round;
    int k = 1 + (int)(u(rng) * 6);
    for (int j = 0; j < k; j++) {
      Timed t; t.c = (u(rng) < spinShare) ? -1 : (int)(u(rng) * ncls);
      CK(cudaEventCreate(&t.a)); CK(cudaEventCreate(&t.b));
      CK(cudaEventRecord(t.a));
      if (t.c < 0) {
        double r = 0.2 * pow(100.0, u(rng));  // 0.2 .. 20 intervals, log-uniform
        K(spin)<<<sms, 32>>>((long long)(r * interval_us * 1e3));
      } else {
        Class& c = cls[t.c];
        if (cursor + c.n4 > buf4) cursor = 0;
        c.fn<<<grid, block>>>(buf + cursor, c.n4, out);
        cursor += c.n4;
      }
      CK(cudaGetLastError());
      CK(cudaEventRecord(t.b));
      round.push_back(t);
    }
    CK(cudaDeviceSynchronize());
    for (auto& t : round) {
      float m; CK(cudaEventElapsedTime(&m, t.a, t.b));
      if (t.c < 0) { spins++; spinMs += m; }
      else { cls[t.c].launches++; cls[t.c].bytes += cls[t.c].n4 * 16.0; cls[t.c].ms += m; }
      cudaEventDestroy(t.a); cudaEventDestroy(t.b);
    }
    // idle gap: 0 .. 3 intervals, sometimes none
    if (u(rng) < 0.7) std::this_thread::sleep_for(std::chrono::microseconds((long)(u(rng) * 3 * interval_us)));
  }
  FILE* f = fopen(argv[4], "w");
  if (!f) { perror(argv[4]); return 1; }
  // calibration_bytes: the three calibration reads (read_r1), not in the kernels' counts
  fprintf(f, "{\"interval_us\": %g, \"bandwidth_gbps\": %.1f, \"calibration_bytes\": %.0f, \"kernels\": {", interval_us, bw / 1e9,
          3.0 * cal4 * 16);
  for (int i = 0; i < ncls; i++)
    fprintf(f, "\"%s\": {\"ratio\": %g, \"launches\": %lld, \"bytes\": %.0f, \"gpu_ms\": %.3f, \"bytes_per_launch\": %zu}, ",
            cls[i].name, cls[i].ratio, cls[i].launches, cls[i].bytes, cls[i].ms, cls[i].n4 * 16);
  fprintf(f, "\"%s\": {\"launches\": %lld, \"bytes\": 0, \"gpu_ms\": %.3f}}, \"pid\": %d}\n", STR(K(spin)), spins, spinMs, (int)getpid());
  fclose(f);
  printf("attrib_truth: %.1f GB/s calibrated, %lld spins, done\n", bw / 1e9, spins);
  return 0;
}
