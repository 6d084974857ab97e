/*
 * fake_cuda.c: a fake libcuda.so.1 for tests. CUPTI_FAKE_DEVICES (default 2) devices, all
 * "NVIDIA H200"; device i has UUID bytes 0xf0+i, 1, 2, ..., 15 (GPU-f0010203-0405-0607-0809-0a0b0c0d0e0f
 * for device 0) and PCI bus id 0000:(0x19 + 0x10*i):00.0 (0000:19:00.0, 0000:29:00.0, ...).
 * With CUPTI_FAKE_DEVICES=0, cuInit returns CUDA_ERROR_NO_DEVICE (100) as the real driver does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;

static int ndev(void) {
	const char *s = getenv("CUPTI_FAKE_DEVICES");
	return s && *s ? atoi(s) : 2;
}

CUresult cuInit(unsigned int flags) {
	if (flags != 0)
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	return ndev() > 0 ? 0 : 100;
}

CUresult cuDeviceGetCount(int *n) {
	*n = ndev();
	return 0;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	if (ordinal < 0 || ordinal >= ndev())
		return 101; /* CUDA_ERROR_INVALID_DEVICE */
	*d = ordinal;
	return 0;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (d < 0 || d >= ndev())
		return 101;
	snprintf(name, (size_t)len, "NVIDIA H200");
	return 0;
}

CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d) {
	if (d < 0 || d >= ndev())
		return 101;
	for (int k = 0; k < 16; k++)
		uuid[k] = (unsigned char)k;
	uuid[0] = (unsigned char)(0xf0 + d);
	return 0;
}

CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice d) { return cuDeviceGetUuid_v2(uuid, d); }

CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice d) {
	if (d < 0 || d >= ndev())
		return 101;
	snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x19 + 0x10 * d);
	return 0;
}
