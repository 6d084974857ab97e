// profapp: a small CUDA program for the profiler-coexistence stages (issue 32). It prints, on
// stdout, the wall clock (CLOCK_REALTIME, s) at its start, once its context exists, and before and
// after each kernel, so that a /proc watcher's times (procwatch.py) line up with it.
// usage: profapp [KERNELS=3] [GAP_MS=0] [SPIN_US=200]
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>
#include <cuda_runtime.h>

static double now() {
	timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

__global__ void spin(unsigned long long ns, float *out) {
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	float x = threadIdx.x;
	do {
		x = x * 1.0001f + 0.5f;
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	} while (t - t0 < ns);
	if (x == -1.f) out[0] = x;
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 3;
	int gap = argc > 2 ? atoi(argv[2]) : 0;
	int us = argc > 3 ? atoi(argv[3]) : 200;
	printf("main %.6f pid %d\n", now(), getpid());
	fflush(stdout);
	float *d;
	if (cudaMalloc(&d, 4) != cudaSuccess) { printf("no device\n"); return 2; }
	printf("context %.6f\n", now());
	fflush(stdout);
	for (int i = 0; i < n; i++) {
		printf("launch %d %.6f\n", i, now());
		fflush(stdout);
		spin<<<132, 128>>>(us * 1000ull, d);
		cudaError_t e = cudaDeviceSynchronize();
		printf("done %d %.6f %s\n", i, now(), cudaGetErrorString(e));
		fflush(stdout);
		if (gap > 0) usleep(gap * 1000);
	}
	printf("exit %.6f\n", now());
	return 0;
}
