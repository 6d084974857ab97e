/*
 * cbid_check.c: checks the injection library's list of work-submitting CUPTI API calls
 * (activity/inject/launch_cbids.h, written without NVIDIA headers) against the machine's
 * real cupti_driver_cbid.h and cupti_runtime_cbid.h: every name must exist there with the
 * same value, or this file does not compile. Run by stage cbidcheck (stages_idle.sh).
 */
#include <stdio.h>

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "launch_cbids.h"

#define DRIVER(name, value) _Static_assert(CUPTI_DRIVER_TRACE_CBID_##name == value, "driver " #name);
#define RUNTIME(name, value) _Static_assert(CUPTI_RUNTIME_TRACE_CBID_##name == value, "runtime " #name);
CX_DRIVER_WORK_CBIDS(DRIVER)
CX_RUNTIME_WORK_CBIDS(RUNTIME)

#define COUNT(name, value) +1
int main(void)
{
	printf("launch cbids match the CUPTI headers: %d driver, %d runtime\n", 0 CX_DRIVER_WORK_CBIDS(COUNT),
	       0 CX_RUNTIME_WORK_CBIDS(COUNT));
	return 0;
}
