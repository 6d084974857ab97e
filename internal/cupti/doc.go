// Package cupti is the project's only binding to NVIDIA CUPTI and the CUDA driver.
//
// It declares, in its own C header, the subset of CUPTI types and functions the exporter uses
// (layouts from ../shared/cupti/REFERENCE.md facts, no NVIDIA header is copied) and resolves every
// function with dlopen/dlsym when Open is called, so `go build` works where CUDA is absent and the
// binary reports clearly when it is. CUPTI result codes become Go errors that name the call, the
// code and, where one exists, the remedy.
package cupti
