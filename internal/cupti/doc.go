// Package cupti is the project's only binding to NVIDIA CUPTI and the CUDA driver.
//
// # Declarations and loading
//
// cupti_decl.h declares, in the project's own words, the subset of CUPTI 13.0 types the exporter
// uses (layouts from shared/cupti/REFERENCE.md; no NVIDIA header is included or copied).
// scripts/gpu/layout_check.sh compares every struct, field offset, *_STRUCT_SIZE and enum value
// with the real headers on a GPU machine, and checks them against the expected 13.0 figures
// anywhere (--self). loader.c resolves every function with dlopen/dlsym (RTLD_NOW) when Open is
// called, so `go build` needs no CUDA and the binary starts anywhere. A missing required symbol
// fails Open with its name and dlerror's text; the optional 13.2 single-pass-set functions are
// left nil and reported by MissingOptional and Warnings.
//
// Open searches Options.LibraryPath, then $CUPTI_EXPORTER_CUPTI_LIBRARY (either one is final),
// then the loader's path (dlopen("libcupti.so.13")), /usr/local/cuda/extras/CUPTI/lib64,
// /usr/local/cuda/targets/x86_64-linux/lib, /usr/local/cuda-13*/targets/x86_64-linux/lib and
// pip wheels' site-packages/nvidia/cu13/lib. libcupti has no RUNPATH and dlopens nvperf by bare
// name, so Open preloads libnvperf_host.so (RTLD_GLOBAL) from libcupti's folder before any
// profiler call. libnvperf_target.so costs about 100 MB of resident memory on load and CUPTI
// 13.0's PM sampling never maps it (H200), so it is loaded from the same folder only when
// cuptiProfilerInitialize, HostInitialize or PmSamplingEnable answers NOT_INITIALIZED, and the
// call is retried once. The profiler is initialised once per process and never de-initialised
// (re-initialising after a DeInitialize returns 39 on an H200); the libraries stay loaded. libcuda.so.1 (or Options.CUDALibraryPath) provides cuInit and
// the device queries; without it Open still succeeds for host-only work (metric catalogs from a
// chip name) and device calls return DriverError.
//
// Features are gated on cuptiGetVersion: Open needs API 24 (CUDA 12.6); SetConfig's
// keep-latest mode needs 26 and sends the 60-byte params before it; LIMITED_SUPPORT counts as
// supported from 130300. A FeatureError names the feature and version and matches
// ErrNotSupported.
//
// Named single-pass metric sets (CUPTI 13.2, sets_cgo.go): SinglePassSets and
// MetricsInSinglePassSet run the two-phase queries of REFERENCE.md §2.4. They gate on both the
// version (API 130200) and the symbols (HasSinglePassSets), and otherwise return a FeatureError
// listing any missing function. NewHostForSet passes the set to HostInitialize in
// pSinglePassMetricSetName (13.2 STRUCT_SIZE 56, also for ConfigImage's host objects); NewHost
// always sends the 13.0 size 48.
//
// # Errors
//
// Every CUptiResult becomes a *CallError naming the function, the code's name (a table that
// works before the library loads), CUPTI's own text and a remedy where one exists, e.g.
//
//	cuptiPmSamplingSetConfig: CUPTI_ERROR_HARDWARE_BUSY (26); another profiler (ncu, ...) holds the performance counters; pause it or this exporter
//
// errors.Is matches the codes callers act on: ErrHardwareBusy (26), ErrInsufficientPrivileges
// (35, 40), ErrOutOfMemory (8, also a hardware-buffer overflow), ErrNotSupported (27 and the
// device-kind codes), ErrInvalidMetricName (17), ErrInvalidOperation (7). errors.Is(err,
// Result(n)) matches one code.
//
// # Memory and lifetimes
//
// Buffers CUPTI reads or keeps are C memory, freed explicitly: the config image is reference
// counted, so a Session holds it from SetConfig until Disable even if ConfigImage.Free runs
// first; the counter data image lives until CounterData.Free. Strings CUPTI owns (chip and
// metric names, descriptions) are copied before returning. Lib, Host, ConfigImage, Session and
// CounterData carry runtime.AddCleanup safety nets, but Close/Free/Disable are the contract.
// cuptiProfilerInitialize runs once before the first open Lib of a file and
// cuptiProfilerDeInitialize once after the last Close (a second DeInitialize crashes CUPTI).
//
// # Threads
//
// CUPTI documents no thread safety for PM sampling or Profiler Host calls. One goroutine per
// device owns its Session, the CounterData and the Host that evaluates them, and calls
// runtime.LockOSThread before Enable; nothing else touches them, except the Session's Decoder,
// a C thread that runs one decode's calls while the owner waits for it (decoder_cgo.go: so
// that no goroutine sits in a cgo call through a decode). Different devices may run in
// parallel goroutines, each with its own Host.
//
// # Testing
//
// Package cuptitest builds a deterministic fake libcupti (fake/, contract in fake/README.md)
// with gcc and steers its faults; the tests here run the whole PM sampling cycle against it.
// TestRealCUPTI runs the same cycle against a real GPU when CUPTI_EXPORTER_REAL_TEST=1.
package cupti
