// Package cuptitest builds the fake CUPTI libraries of ../fake for tests and steers them.
//
// Build compiles, once per test binary (and once per content hash on the machine), a fake
// libcupti.so.13, empty libnvperf_host.so / libnvperf_target.so and a fake libcuda.so.1 with
// gcc, and returns cupti.Options pointing at them. Inject changes the fake's faults at run time
// in this process; Query reads its counters. The fake's contract (devices, values, pass rule,
// faults) is written in ../fake/README.md.
//
// Tests that use it need gcc on PATH; Build skips the test when gcc is missing.
package cuptitest
