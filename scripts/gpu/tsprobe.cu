// Time-slice probe (issue 21; stage attrib_record): one block on one SM reads %globaltimer in
// a loop for SECONDS and records every jump of more than 20 µs, that is every interval in
// which another context held the GPU. Run beside another process: the gaps are the other
// context's time slices, the runs between them this one's.
//   tsprobe SECONDS
// Prints the count, percentiles of gap and run lengths (µs) and the first 40 gaps.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define MAXG (1 << 20)
__global__ void probe(long long ns, unsigned long long* gaps, unsigned* n) {
  long long t0, prev, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  prev = t0;
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - prev > 20000) {
      unsigned i = atomicAdd(n, 1);
      if (i < MAXG / 2) { gaps[2 * i] = prev; gaps[2 * i + 1] = t; }
    }
    prev = t;
  } while (t - t0 < ns);
}

static double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, (size_t)(p * v.size()))];
}

int main(int argc, char** argv) {
  double secs = argc > 1 ? atof(argv[1]) : 5;
  unsigned long long* g; unsigned* n;
  cudaMalloc(&g, MAXG * sizeof(unsigned long long)); cudaMalloc(&n, sizeof(unsigned));
  cudaMemset(n, 0, sizeof(unsigned));
  probe<<<1, 1>>>((long long)(secs * 1e9), g, n);
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { fprintf(stderr, "tsprobe: %s\n", cudaGetErrorString(e)); return 1; }
  unsigned cnt; cudaMemcpy(&cnt, n, sizeof cnt, cudaMemcpyDeviceToHost);
  unsigned k = std::min(cnt, (unsigned)(MAXG / 2));
  std::vector<unsigned long long> h(2 * (size_t)k);
  cudaMemcpy(h.data(), g, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
  std::vector<double> gaps, runs;
  double gapSum = 0;
  for (unsigned i = 0; i < k; i++) {
    gaps.push_back((h[2 * i + 1] - h[2 * i]) / 1e3); gapSum += gaps.back();
    if (i > 0) runs.push_back((h[2 * i] - h[2 * i - 1]) / 1e3);
  }
  printf("tsprobe: %.1f s, %u gaps > 20 us, %.1f %% of the time away\n", secs, cnt, gapSum / (secs * 1e4));
  printf("tsprobe: gap us p10 %.0f p50 %.0f p90 %.0f max %.0f; run us p10 %.0f p50 %.0f p90 %.0f\n",
         pct(gaps, .1), pct(gaps, .5), pct(gaps, .9), pct(gaps, 1), pct(runs, .1), pct(runs, .5), pct(runs, .9));
  for (unsigned i = 0; i < std::min(k, 40u); i++)
    printf("gap %u at +%.3f ms: %.0f us\n", i, (h[2 * i] - h[0]) / 1e6, (h[2 * i + 1] - h[2 * i]) / 1e3);
  return 0;
}
