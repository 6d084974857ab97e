/* proc.c: gathers what the hello frame says about this process: pid, start
 * time, executable, cgroup, pod attribution from the environment, and the
 * CUDA driver version and device UUIDs from the already loaded libcuda. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"

static void read_file(const char *path, char *dst, size_t cap)
{
	dst[0] = 0;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	size_t n = fread(dst, 1, cap - 1, f);
	fclose(f);
	while (n > 0 && (dst[n - 1] == '\n' || dst[n - 1] == 0))
		n--;
	dst[n] = 0;
}

static uint64_t start_time_ns(void)
{
	char stat[4096], all[8192];
	read_file("/proc/self/stat", stat, sizeof stat);
	const char *p = strrchr(stat, ')'); /* comm may hold spaces */
	unsigned long long ticks = 0;
	if (!p)
		return 0;
	/* fields after comm start at 3 (state); starttime is field 22 */
	int field = 2;
	for (; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	ticks = strtoull(p, NULL, 10);
	read_file("/proc/stat", all, sizeof all);
	const char *b = strstr(all, "\nbtime ");
	long hz = sysconf(_SC_CLK_TCK);
	if (!b || hz <= 0)
		return 0;
	unsigned long long btime = strtoull(b + 7, NULL, 10);
	return btime * 1000000000ull + ticks * (1000000000ull / (unsigned long long)hz);
}

static void env(const char *a, const char *b, char *dst, size_t cap)
{
	const char *v = getenv(a);
	if (!v)
		v = getenv(b);
	snprintf(dst, cap, "%s", v ? v : "");
}

typedef int (*cu_int_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_uuid_fn)(unsigned char *, int);

static void devices(struct cx_hello *h, const char *cuda_library)
{
	/* libcuda loaded us, so it is mapped already; never load a second one. */
	void *cuda = dlopen(cuda_library, RTLD_NOW | RTLD_NOLOAD);
	if (!cuda)
		return;
	/* The sender calls this after connecting, possibly while the application's
	 * cuInit (which loaded us) is still running: cuInit is idempotent and
	 * makes this thread wait for it, so the device queries below succeed. */
	int (*init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");
	cu_int_fn version = (cu_int_fn)dlsym(cuda, "cuDriverGetVersion");
	cu_int_fn count = (cu_int_fn)dlsym(cuda, "cuDeviceGetCount");
	cu_get_fn get = (cu_get_fn)dlsym(cuda, "cuDeviceGet");
	cu_uuid_fn uuid = (cu_uuid_fn)dlsym(cuda, "cuDeviceGetUuid_v2");
	if (!uuid)
		uuid = (cu_uuid_fn)dlsym(cuda, "cuDeviceGetUuid");
	int v = 0, n = 0;
	if (version && version(&v) == 0)
		h->cuda_version = (uint32_t)v;
	if (init && init(0) != 0)
		count = NULL; /* no usable driver: no UUIDs */
	if (count && get && uuid && count(&n) == 0) {
		if (n > CX_MAX_DEVICES)
			n = CX_MAX_DEVICES;
		for (int i = 0; i < n; i++) {
			int dev;
			unsigned char u[16];
			h->uuids[i][0] = 0;
			if (get(&dev, i) != 0 || uuid(u, dev) != 0)
				continue;
			snprintf(h->uuids[i], sizeof h->uuids[i],
				 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
				 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
		}
		h->ndevices = n;
	}
	dlclose(cuda);
}

void cx_proc_hello(struct cx_hello *h, uint32_t cupti_version, const char *cuda_library)
{
	memset(h, 0, sizeof *h);
	h->pid = (uint32_t)getpid();
	h->cupti_version = cupti_version;
	h->start_time_ns = start_time_ns();
	ssize_t n = readlink("/proc/self/exe", h->exe, CX_MAX_STRING);
	h->exe[n > 0 ? n : 0] = 0;
	read_file("/proc/self/cgroup", h->cgroup, sizeof h->cgroup);
	env("POD_NAME", "KUBERNETES_POD_NAME", h->pod, sizeof h->pod);
	env("POD_NAMESPACE", "KUBERNETES_NAMESPACE", h->namespace_, sizeof h->namespace_);
	env("CONTAINER_NAME", "KUBERNETES_CONTAINER_NAME", h->container, sizeof h->container);
	devices(h, cuda_library);
}
