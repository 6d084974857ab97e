package cupti

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinels for the results callers act on. Test with errors.Is; every error from a CUPTI call
// is a *CallError whose Result matches the sentinel of its code.
var (
	// ErrNotSupported: the binding cannot do this here (no cgo build, library absent, CUPTI too
	// old, optional function missing, device or configuration unsupported, multi-pass config).
	ErrNotSupported = errors.New("not supported")
	// ErrHardwareBusy: another client holds the performance monitors (26).
	ErrHardwareBusy = errors.New("performance monitors busy")
	// ErrInsufficientPrivileges: counters are restricted to admin users (35, 40).
	ErrInsufficientPrivileges = errors.New("insufficient privileges")
	// ErrOutOfMemory: allocation failure, or a PM sampling hardware-buffer overflow from
	// DecodeData (8); after an overflow in keep-oldest mode the session must be recreated.
	ErrOutOfMemory = errors.New("out of memory or hardware buffer overflow")
	// ErrInvalidMetricName: a metric name unknown to the chip (17).
	ErrInvalidMetricName = errors.New("invalid metric name")
	// ErrInvalidOperation: a call in the wrong state, e.g. PM sampling already enabled on the
	// device in this process (7).
	ErrInvalidOperation = errors.New("invalid operation")
	// ErrClosed: the handle was closed or freed.
	ErrClosed = errors.New("handle closed")
)

// Result is a CUptiResult. It implements error so it can be matched with errors.Is, but the
// binding returns it only wrapped in a *CallError.
type Result int32

// Result codes used by the binding (cupti_result.h, 13.0).
const (
	Success                 Result = 0
	ErrorInvalidParameter   Result = 1
	ErrorInvalidOperation   Result = 7
	ErrorOutOfMemory        Result = 8
	ErrorNotInitialized     Result = 15
	ErrorInvalidMetricName  Result = 17
	ErrorHardwareBusy       Result = 26
	ErrorNotSupported       Result = 27
	ErrorInsufficientPrivs  Result = 35
	ErrorInvalidChipName    Result = 46
	ErrorUnknown            Result = 999
	ErrorAPINotImplemented  Result = 11
	ErrorMaxLimitReached    Result = 12
	ErrorMultipleSubscriber Result = 39
)

// resultNames is the 13.0 name table; it works before any library is loaded.
var resultNames = map[Result]string{
	0: "CUPTI_SUCCESS", 1: "CUPTI_ERROR_INVALID_PARAMETER", 2: "CUPTI_ERROR_INVALID_DEVICE",
	3: "CUPTI_ERROR_INVALID_CONTEXT", 4: "CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID",
	5: "CUPTI_ERROR_INVALID_EVENT_ID", 6: "CUPTI_ERROR_INVALID_EVENT_NAME",
	7: "CUPTI_ERROR_INVALID_OPERATION", 8: "CUPTI_ERROR_OUT_OF_MEMORY", 9: "CUPTI_ERROR_HARDWARE",
	10: "CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT", 11: "CUPTI_ERROR_API_NOT_IMPLEMENTED",
	12: "CUPTI_ERROR_MAX_LIMIT_REACHED", 13: "CUPTI_ERROR_NOT_READY", 14: "CUPTI_ERROR_NOT_COMPATIBLE",
	15: "CUPTI_ERROR_NOT_INITIALIZED", 16: "CUPTI_ERROR_INVALID_METRIC_ID",
	17: "CUPTI_ERROR_INVALID_METRIC_NAME", 18: "CUPTI_ERROR_QUEUE_EMPTY", 19: "CUPTI_ERROR_INVALID_HANDLE",
	20: "CUPTI_ERROR_INVALID_STREAM", 21: "CUPTI_ERROR_INVALID_KIND", 22: "CUPTI_ERROR_INVALID_EVENT_VALUE",
	23: "CUPTI_ERROR_DISABLED", 24: "CUPTI_ERROR_INVALID_MODULE", 25: "CUPTI_ERROR_INVALID_METRIC_VALUE",
	26: "CUPTI_ERROR_HARDWARE_BUSY", 27: "CUPTI_ERROR_NOT_SUPPORTED", 28: "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED",
	29: "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE", 30: "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES",
	31: "CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS", 32: "CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED",
	33: "CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED", 34: "CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE",
	35: "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES", 36: "CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED",
	37: "CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE", 38: "CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED",
	39: "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", 40: "CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES",
	41: "CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED", 42: "CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED",
	43: "CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED", 44: "CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED",
	45: "CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED", 46: "CUPTI_ERROR_INVALID_CHIP_NAME",
	999: "CUPTI_ERROR_UNKNOWN",
}

// Name is the CUPTI name of the code, or CUPTI_ERROR_<n> for a code this table does not know.
func (r Result) Name() string {
	if n, ok := resultNames[r]; ok {
		return n
	}
	return "CUPTI_ERROR_" + strconv.Itoa(int(r))
}

// Error is "NAME (code)".
func (r Result) Error() string { return r.Name() + " (" + strconv.Itoa(int(r)) + ")" }

// Remedy is what an operator can do about the code in this exporter's workflow, or "".
func (r Result) Remedy() string {
	switch r {
	case 35:
		return "performance counters are restricted to admin users: run as root or with CAP_SYS_ADMIN " +
			"(CAP_PERFMON from driver R565), or load the NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0; " +
			"in a container add --cap-add=SYS_ADMIN or allow it on the host"
	case 40:
		return "profiling is not enabled on this vGPU: set the vGPU plugin parameter enable_profiling"
	case 26:
		return "another profiler (ncu, Nsight Systems GPU metrics, DCGM profiling, another exporter) holds the " +
			"performance counters; pause it or this exporter"
	case 15:
		return "the NVIDIA driver is too old for this CUPTI, or libnvperf_host.so/libnvperf_target.so are not " +
			"loadable: keep them next to libcupti or on LD_LIBRARY_PATH"
	case 27:
		return "the configuration or device is not supported (a PM sampling config must need one pass)"
	case 17:
		return "the metric does not exist for this chip: list them with `cupti-exporter metrics list`"
	case 7:
		return "PM sampling may already be enabled on this device by this process"
	case 46:
		return "the chip name is unknown to this CUPTI: upgrade CUPTI"
	case 41:
		return "CUPTI profiling is not available in confidential-computing mode"
	case 43:
		return "profiling this MIG configuration is not supported"
	}
	return ""
}

// Is makes errors.Is(err, ErrHardwareBusy) and friends work on a Result.
func (r Result) Is(target error) bool {
	s := r.sentinel()
	return s != nil && target == s
}

func (r Result) sentinel() error {
	switch r {
	case 26:
		return ErrHardwareBusy
	case 35, 40:
		return ErrInsufficientPrivileges
	case 8:
		return ErrOutOfMemory
	case 11, 27, 33, 38, 41, 42, 43, 44, 45:
		return ErrNotSupported
	case 17:
		return ErrInvalidMetricName
	case 7:
		return ErrInvalidOperation
	}
	return nil
}

// CallError is a failed CUPTI call: the function, its result, CUPTI's own text and the remedy.
type CallError struct {
	Func   string
	Result Result
	Detail string // cuptiGetResultString's text, when the library gave one
}

func (e *CallError) Error() string {
	s := e.Func + ": " + e.Result.Error()
	if e.Detail != "" && e.Detail != e.Result.Name() {
		s += ": " + e.Detail
	}
	if rem := e.Result.Remedy(); rem != "" {
		s += "; " + rem
	}
	return s
}

func (e *CallError) Unwrap() error { return e.Result }

// DriverError is a failed CUDA driver call (CUresult).
type DriverError struct {
	Func string
	Code int
}

var driverNames = map[int]string{
	1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY", 3: "CUDA_ERROR_NOT_INITIALIZED",
	4: "CUDA_ERROR_DEINITIALIZED", 34: "CUDA_ERROR_STUB_LIBRARY", 35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
	46: "CUDA_ERROR_DEVICE_UNAVAILABLE", 100: "CUDA_ERROR_NO_DEVICE", 101: "CUDA_ERROR_INVALID_DEVICE",
	304: "CUDA_ERROR_OPERATING_SYSTEM", 999: "CUDA_ERROR_UNKNOWN",
}

func (e *DriverError) Error() string {
	name, ok := driverNames[e.Code]
	if !ok {
		name = "CUDA_ERROR_" + strconv.Itoa(e.Code)
	}
	s := fmt.Sprintf("%s: %s (%d)", e.Func, name, e.Code)
	switch e.Code {
	case 100:
		s += "; no CUDA device is visible (check CUDA_VISIBLE_DEVICES and the device plugin)"
	case 34, 35:
		s += "; the NVIDIA driver is missing or older than this CUDA"
	}
	return s
}

// FeatureError says a feature needs a newer CUPTI than the one loaded. It matches ErrNotSupported.
type FeatureError struct {
	Feature    string
	MinVersion uint32   // cuptiGetVersion value that introduced it
	Have       uint32   // the loaded library's cuptiGetVersion value
	Missing    []string // functions the feature needs that the library does not export
}

func (e *FeatureError) Error() string {
	s := fmt.Sprintf("%s needs CUPTI API version %d%s or later, loaded %d", e.Feature, e.MinVersion, releaseName(e.MinVersion), e.Have)
	if len(e.Missing) > 0 {
		s += " which lacks " + strings.Join(e.Missing, ", ")
	}
	return s + "; upgrade CUPTI (a newer CUDA toolkit, or pip install nvidia-cuda-cupti)"
}

// releaseName is " (CUDA x.y)" for an API version whose release is known, else "".
func releaseName(v uint32) string {
	switch {
	case v == VersionPMSampling:
		return " (CUDA 12.6)"
	case v == VersionAppendMode:
		return " (CUDA 12.8)"
	case v >= 100000: // from 13.0 the version is major*10000 + minor*100 + update
		return fmt.Sprintf(" (CUDA %d.%d)", v/10000, v/100%100)
	}
	return ""
}

func (e *FeatureError) Is(target error) bool { return target == ErrNotSupported }

// API versions (cuptiGetVersion) that gate features.
const (
	VersionPMSampling     uint32 = 24     // CUDA 12.6: PM sampling, Profiler Host API
	VersionAppendMode     uint32 = 26     // CUDA 12.8: SetConfig.hwBufferAppendMode
	VersionSinglePassSets uint32 = 130200 // CUDA 13.2: single-pass-set queries
	VersionLimitedSupport uint32 = 130300 // CUDA 13.3: CUPTI_PROFILER_CONFIGURATION_LIMITED_SUPPORT
)
