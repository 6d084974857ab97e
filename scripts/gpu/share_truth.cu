// Ground truth for attribution on a shared GPU (issue 31; stage attrib_share in
// scripts/gpu/stages_share.sh): one process of a sharing mode (time-slicing, MPS), launching a
// role's mix of kernels whose DRAM read bytes are known, tensor-core kernels that read nothing
// from DRAM, and spin kernels that read nothing, with the role's kernel durations, launch widths,
// burst lengths and idle gaps.
//
//   share_truth SECONDS SEED OUT.json ROLE
//
// Roles come in two sets that never mix: t-* to tune the join with, c-* only to check it (other
// shapes, rates, launch widths, bursts and gaps). Built with -DKPFX=t_ or -DKPFX=c_, so the two
// sets also have their own kernel names.
//   rd    reads a known number of bytes once each from a 4 GiB ring (far larger than the 50-60 MB
//         L2, so every byte comes from DRAM), at the role's launch width;
//   mma   keeps the tensor pipe busy (bf16 WMMA on fragments loaded once, no DRAM traffic) for
//         a given time;
//   spin  keeps SMs busy reading the clock, nothing else.
// The JSON lists, per kernel name, launches and bytes read, the tensor-kernel time asked for,
// and the pid (NVML's, to match the exporter's process lists).
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>

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

using namespace nvcuda;

__device__ __forceinline__ long long gtime() {
  long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Reads n float4 of the ring p[0..m) from off on, each once (n may exceed m: the ring wraps;
// its 4 GiB keep every read a DRAM read).
extern "C" __global__ void K(rd)(const float4* __restrict__ p, size_t m, size_t off, size_t n, float* out) {
  float acc = 0.f;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t idx = (off + i) % m;
  for (; i < n; i += stride) {
    float4 v = __ldcs(p + idx);
    acc += v.x + v.y + v.z + v.w;
    idx += stride;
    while (idx >= m) idx -= m;
  }
  if (acc == 1.2345f) out[blockIdx.x] = acc;  // never true: keeps the loads alive
}

extern "C" __global__ void K(spin)(long long ns) {
  long long t0 = gtime();
  while (gtime() - t0 < ns) {
  }
}

// Tensor work for ns nanoseconds: every warp multiplies two 16x16 bf16 tiles (loaded once from
// a 1 KB buffer that stays in L2) into two accumulators, 64 products between clock reads.
extern "C" __global__ void K(mma)(const __nv_bfloat16* a, long long ns, float* out, int store) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, a + 256, 16);
  wmma::fill_fragment(c0, 0.0f);
  wmma::fill_fragment(c1, 0.0f);
  long long t0 = gtime();
  do {
#pragma unroll
    for (int i = 0; i < 32; i++) {
      wmma::mma_sync(c0, fa, fb, c0);
      wmma::mma_sync(c1, fa, fb, c1);
    }
  } while (gtime() - t0 < ns);
  if (store) {  // never set: keeps the products alive
    size_t w = (size_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    wmma::store_matrix_sync(out + w * 256, c0, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(out + w * 256, c1, 16, wmma::mem_row_major);
  }
}

// A role: the mix of kernels, their durations (ms, log-uniform in [lo, hi]), launch widths
// (blocks per SM, threads per block), burst lengths (kernels launched back to back before a
// sync) and idle gaps after a burst (probability, ms uniform in [lo, hi]).
struct Role {
  const char* name;
  double pRd, pMma;  // the rest are spin kernels
  double rdLo, rdHi, mmaLo, mmaHi, spinLo, spinHi;
  double rdBlocksPerSM; int rdThreads;
  double mmaBlocksPerSM; int mmaThreads;
  int burstLo, burstHi;
  double gapP, gapLo, gapHi;
  double rdWidth;  // the share of the full read bandwidth the role's rd launch gets alone (sizing)
};

static const Role roles[] = {
    // tune set
    {"t-stream", 0.70, 0.00, 0.3, 8, 0, 0, 0.2, 4, 4, 512, 0, 0, 1, 6, 0.7, 0, 3, 1.0},
    {"t-tensor", 0.35, 0.50, 0.3, 4, 0.5, 5, 0.2, 2, 4, 512, 2, 128, 1, 4, 0.5, 0, 2, 1.0},
    {"t-light", 0.40, 0.00, 1, 3, 0, 0, 1, 10, 4, 512, 0, 0, 1, 3, 0.8, 0, 6, 1.0},
    // a bursty tune role (added in run DZ: the tune set had no process that is idle at half
    // the switches, as c-burst is)
    {"t-pulse", 0.85, 0.00, 0.2, 1.5, 0, 0, 0.1, 0.5, 4, 512, 0, 0, 2, 6, 1.0, 1, 8, 1.0},
    // many very short full-width kernels in long bursts, idle after each (added in run FC: a
    // process that has work at the switch after a gap, the incoming one of many switches,
    // as c-burst is among four; t-pulse's few long kernels were not)
    {"t-flick", 0.60, 0.00, 0.03, 0.25, 0, 0, 0.02, 0.1, 4, 512, 0, 0, 20, 50, 1.0, 2, 12, 1.0},
    // the same at an eighth of the threads (two 128-thread blocks an SM): a narrow bursty reader
    // (added in run FF: among four traced, c-burst is overstated on the H200, t-flick is not)
    {"t-nibble", 0.90, 0.00, 0.04, 0.3, 0, 0, 0.03, 0.15, 2, 128, 0, 0, 6, 20, 0.8, 3, 15, 0.35},
    // bursts at half the threads (two 512-thread blocks an SM; added in run FG: which way a bursty
    // reader errs may follow its width)
    {"t-half", 0.85, 0.00, 0.08, 0.5, 0, 0, 0.05, 0.3, 2, 512, 0, 0, 8, 24, 0.9, 2, 16, 0.6},
    // t-nibble's kernels in bursts of 2.5-6 ms, longer than a time slice, so others' turns cut them
    // (added in run FH: t-nibble's records are all but never cut by another process's turn,
    // c-burst's are: 2.0 of its 3.0 s of read records, run EL)
    {"t-trickle", 0.90, 0.00, 0.04, 0.3, 0, 0, 0.03, 0.15, 2, 128, 0, 0, 25, 60, 0.8, 3, 15, 0.35},
    // long reads of 3-15 ms that span many turns with no edge in them (added in run FS: beside
    // c-steady's and c-tensor's long reads the bursty c-burst untraced is overstated, +13 to +41 %,
    // beside t-stream's and t-tensor's shorter ones the narrow t-nibble is not)
    {"t-long", 0.85, 0.00, 3, 15, 0, 0, 0.5, 2, 4, 512, 0, 0, 2, 6, 0.3, 0, 1, 1.0},
    // check set: short narrow bursts, long wide reads, small tensor kernels, quarter-width reads
    {"c-burst", 0.95, 0.00, 0.05, 0.4, 0, 0, 0.05, 0.2, 1, 256, 0, 0, 10, 30, 1.0, 4, 20, 0.5},
    {"c-steady", 0.90, 0.00, 5, 25, 0, 0, 1, 3, 8, 256, 0, 0, 2, 8, 0.2, 0, 1, 1.0},
    {"c-tensor", 0.30, 0.60, 2, 10, 0.1, 1, 0.5, 1, 2, 1024, 1, 256, 3, 10, 0.4, 1, 5, 1.0},
    {"c-narrow", 0.65, 0.00, 0.5, 3, 0, 0, 0.5, 2, 0.5, 128, 0, 0, 1, 6, 0.6, 0, 4, 0.25},
};

// Nominal read bandwidth of a full-width rd launch alone, for sizing only (an H100 reads about
// 3 TB/s): the bytes are counted exactly whatever the duration turns out to be.
static const double kNominalBytesPerMs = 2.5e9;

int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "usage: %s SECONDS SEED OUT.json ROLE\n", argv[0]); return 2; }
  double secs = atof(argv[1]);
  std::mt19937_64 rng(strtoull(argv[2], nullptr, 10));
  const Role* r = nullptr;
  for (const Role& x : roles) if (strcmp(x.name, argv[4]) == 0) r = &x;
  if (!r) { fprintf(stderr, "unknown role %s\n", argv[4]); return 2; }

  const size_t ringBytes = 4ull << 30, ring4 = ringBytes / 16;
  float4* ring; float* out; __nv_bfloat16* tiles;
  CK(cudaMalloc(&ring, ringBytes)); CK(cudaMalloc(&out, 64 << 20)); CK(cudaMalloc(&tiles, 1024));
  CK(cudaMemset(ring, 0, ringBytes)); CK(cudaMemset(tiles, 0, 1024));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int rdGrid = (int)std::max(1.0, r->rdBlocksPerSM * sms);
  const int mmaGrid = (int)std::max(1.0, r->mmaBlocksPerSM * sms);
  const size_t rdChunk4 = (size_t)rdGrid * r->rdThreads;

  std::uniform_real_distribution<double> u(0, 1);
  auto logu = [&](double lo, double hi) { return lo * pow(hi / lo, u(rng)); };
  long long rdLaunches = 0, mmaLaunches = 0, spinLaunches = 0;
  double rdBytes = 0, mmaMs = 0, spinMs = 0;
  size_t cursor = 0;
  auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < secs) {
    int k = r->burstLo + (int)(u(rng) * (r->burstHi - r->burstLo + 1));
    for (int j = 0; j < k; j++) {
      double x = u(rng);
      if (x < r->pRd) {
        double ms = logu(r->rdLo, r->rdHi);
        size_t n4 = (size_t)(ms * kNominalBytesPerMs * r->rdWidth / 16);
        n4 = std::max(rdChunk4, (n4 + rdChunk4 - 1) / rdChunk4 * rdChunk4);  // whole grid strides
        K(rd)<<<rdGrid, r->rdThreads>>>(ring, ring4, cursor, n4, out);
        cursor = (cursor + n4) % ring4;
        rdLaunches++; rdBytes += n4 * 16.0;
      } else if (x < r->pRd + r->pMma) {
        double ms = logu(r->mmaLo, r->mmaHi);
        K(mma)<<<mmaGrid, r->mmaThreads>>>(tiles, (long long)(ms * 1e6), out, 0);
        mmaLaunches++; mmaMs += ms;
      } else {
        double ms = logu(r->spinLo, r->spinHi);
        K(spin)<<<sms, 32>>>((long long)(ms * 1e6));
        spinLaunches++; spinMs += ms;
      }
      CK(cudaGetLastError());
    }
    CK(cudaDeviceSynchronize());
    if (u(rng) < r->gapP) {
      double ms = r->gapLo + u(rng) * (r->gapHi - r->gapLo);
      std::this_thread::sleep_for(std::chrono::microseconds((long)(ms * 1e3)));
    }
  }
  FILE* f = fopen(argv[3], "w");
  if (!f) { perror(argv[3]); return 1; }
  fprintf(f, "{\"role\": \"%s\", \"pid\": %d, \"seconds\": %g, \"kernels\": {", r->name, (int)getpid(), secs);
  fprintf(f, "\"%s\": {\"launches\": %lld, \"bytes\": %.0f}, ", STR(K(rd)), rdLaunches, rdBytes);
  fprintf(f, "\"%s\": {\"launches\": %lld, \"bytes\": 0, \"tensor\": true, \"asked_ms\": %.3f}, ", STR(K(mma)), mmaLaunches, mmaMs);
  fprintf(f, "\"%s\": {\"launches\": %lld, \"bytes\": 0, \"asked_ms\": %.3f}}}\n", STR(K(spin)), spinLaunches, spinMs);
  fclose(f);
  printf("share_truth %s: %lld rd (%.1f GB), %lld mma, %lld spin\n", r->name, rdLaunches, rdBytes / 1e9, mmaLaunches, spinLaunches);
  return 0;
}
