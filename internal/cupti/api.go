package cupti

// This file fixes the Go API of the binding that pmsample and the CLI build against.
// Bodies are filled in by the cgo implementation (see *_cgo.go); a !cgo build returns
// ErrNotSupported from Open.

// MetricType mirrors CUpti_MetricType.
type MetricType int

const (
	MetricTypeCounter    MetricType = 0
	MetricTypeRatio      MetricType = 1
	MetricTypeThroughput MetricType = 2
)

// TriggerMode mirrors CUpti_PmSampling_TriggerMode.
type TriggerMode int

const (
	TriggerSysClock TriggerMode = 0 // interval in GPU SYS-clock cycles
	TriggerGPUTime  TriggerMode = 1 // interval in nanoseconds
)

// DecodeStopReason mirrors CUpti_PmSampling_DecodeStopReason.
type DecodeStopReason int

const (
	StopOther           DecodeStopReason = 0 // seen on every decode during sampling: success
	StopCounterDataFull DecodeStopReason = 1 // the counter data image filled up: samples lost
	StopEndOfRecords    DecodeStopReason = 2 // everything decoded: success
)

// Options control where the libraries are found.
type Options struct {
	// LibraryPath is an explicit path to libcupti.so.13 (or a folder holding it). Empty: search.
	LibraryPath string
	// CUDALibraryPath is an explicit path to libcuda.so.1. Empty: the loader's path.
	CUDALibraryPath string
}

// DeviceInfo describes one CUDA device as the driver reports it.
type DeviceInfo struct {
	Index    int    // CUDA ordinal (after CUDA_VISIBLE_DEVICES)
	Name     string // e.g. "NVIDIA H200"
	UUID     string // "GPU-xxxxxxxx-xxxx-..."
	PCIBusID string // "0000:19:00.0"
}

// MetricProperties are the properties of a base metric.
type MetricProperties struct {
	Name        string
	Description string
	HWUnit      string
	DimUnit     string
	Type        MetricType
}

// SetConfig are the parameters of cuptiPmSamplingSetConfig.
type SetConfig struct {
	HardwareBufferSize uint64 // bytes of GPU-side buffer
	Interval           uint64 // ns in TriggerGPUTime mode, cycles in TriggerSysClock mode
	Trigger            TriggerMode
	KeepLatest         bool // hwBufferAppendMode; false = KEEP_OLDEST (the only mode to rely on)
}

// DecodeResult is what one cuptiPmSamplingDecodeData call reported.
type DecodeResult struct {
	StopReason DecodeStopReason
	Overflow   bool // the hardware buffer overflowed; in KEEP_OLDEST mode the session is dead
}

// CounterDataInfo mirrors CUpti_PmSampling_GetCounterDataInfo_Params outputs.
type CounterDataInfo struct {
	Total, Populated, Completed int
}
