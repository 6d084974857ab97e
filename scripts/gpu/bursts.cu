// Workload for issue 19 (stage pmcheck): the kinds of work that showed impossible PM ratios on
// an H100, in phases printed with their epoch times (as workload.py prints them):
//
//   bursts SECONDS_PER_PHASE SEED
//
//   idle     nothing
//   bursts   every SM spinning for 10-50 ms, then 10-50 ms idle, repeated
//   oneblock a single 32-thread block spinning (one SM busy, the rest idle)
//   stream   a DRAM read+write kernel over 4 GiB, back to back
//   idle     nothing
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void spin(long long ns) {
  long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

__global__ void stream(const float4* __restrict__ in, float4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    out[i] = in[i];
}

static double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  std::mt19937_64 rng(argc > 2 ? strtoull(argv[2], nullptr, 10) : 1);
  std::uniform_real_distribution<double> u(0, 1);
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t n4 = (2ull << 30) / 16;
  float4 *a, *b; CK(cudaMalloc(&a, n4 * 16)); CK(cudaMalloc(&b, n4 * 16)); CK(cudaMemset(a, 0, n4 * 16));
  CK(cudaDeviceSynchronize());
  auto phase = [&](const char* name, auto body) {
    double t0 = now(); long n = 0;
    printf("phase %s start %.3f\n", name, t0); fflush(stdout);
    while (now() - t0 < secs) { body(); n++; }
    CK(cudaDeviceSynchronize());
    printf("phase %s end %.3f iters %ld\n", name, now(), n); fflush(stdout);
  };
  phase("idle", [&] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  phase("bursts", [&] {
    spin<<<sms * 4, 512>>>((long long)((10 + 40 * u(rng)) * 1e6)); CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::this_thread::sleep_for(std::chrono::microseconds((long)((10 + 40 * u(rng)) * 1e3)));
  });
  phase("oneblock", [&] { spin<<<1, 32>>>(20000000LL); CK(cudaGetLastError()); CK(cudaDeviceSynchronize()); });
  phase("stream", [&] { stream<<<sms * 4, 512>>>(a, b, n4); CK(cudaGetLastError()); CK(cudaDeviceSynchronize()); });
  phase("idle", [&] { std::this_thread::sleep_for(std::chrono::milliseconds(50)); });
  return 0;
}
