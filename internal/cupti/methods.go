package cupti

import "errors"

// ErrNotSupported is returned where the binding cannot work (no cgo build, library absent,
// optional function missing). Callers test it with errors.Is.
var ErrNotSupported = errors.New("not supported")

// The declarations below are the API contract. The cgo implementation replaces these stubs
// (this file is deleted once lib_cgo.go implements every method with the same signature).

// Lib is a loaded libcupti + libcuda pair. Methods are safe to call from one goroutine at a time;
// pmsample calls them from one OS-locked goroutine per device.
type Lib struct{ impl any }

// Open loads the libraries (explicit path, then loader path, then the usual folders),
// preloads nvperf from the same folder, resolves every required symbol, calls cuInit(0)
// and cuptiProfilerInitialize once.
func Open(opts Options) (*Lib, error) { return nil, ErrNotSupported }

// Close calls cuptiProfilerDeInitialize once and releases the handles.
func (l *Lib) Close() error { return nil }

// Version is cuptiGetVersion (e.g. 130001).
func (l *Lib) Version() uint32 { return 0 }

// Path is the file libcupti was loaded from.
func (l *Lib) Path() string { return "" }

// HasSinglePassSets reports whether the 13.2 single-pass-set queries exist.
func (l *Lib) HasSinglePassSets() bool { return false }

// Devices lists CUDA devices with name, UUID and PCI bus id.
func (l *Lib) Devices() ([]DeviceInfo, error) { return nil, ErrNotSupported }

// PMSamplingSupported runs cuptiProfilerDeviceSupported with api = PM_SAMPLING; the error
// names the unsupported aspect (architecture, vGPU, confidential compute, ...).
func (l *Lib) PMSamplingSupported(dev int) error { return ErrNotSupported }

// ChipName is cuptiDeviceGetChipName (e.g. "GH100").
func (l *Lib) ChipName(dev int) (string, error) { return "", ErrNotSupported }

// CounterAvailability is the two-phase cuptiPmSamplingGetCounterAvailability.
func (l *Lib) CounterAvailability(dev int) ([]byte, error) { return nil, ErrNotSupported }

// SupportedChips is cuptiProfilerHostGetSupportedChips.
func (l *Lib) SupportedChips() ([]string, error) { return nil, ErrNotSupported }

// Host is a Profiler Host object for PM sampling of one chip. It owns C memory; Close frees it.
type Host struct{ impl any }

// NewHost is cuptiProfilerHostInitialize with profilerType PM_SAMPLING. availability may be nil
// (host-only use from a chip name).
func (l *Lib) NewHost(chip string, availability []byte) (*Host, error) { return nil, ErrNotSupported }

func (h *Host) Close() error                                           { return nil }
func (h *Host) BaseMetrics(t MetricType) ([]string, error)             { return nil, ErrNotSupported }
func (h *Host) SubMetrics(t MetricType, base string) ([]string, error) { return nil, ErrNotSupported }
func (h *Host) Properties(metric string) (MetricProperties, error) {
	return MetricProperties{}, ErrNotSupported
}
func (h *Host) MaxMetricsPerPass() (int, error) { return 0, ErrNotSupported }

// ConfigImage builds a config image for the metrics (ConfigAddMetrics, GetConfigImageSize,
// GetConfigImage) on a fresh host state, so calls are independent. The image is C memory that
// must outlive the PM sampling session it configures.
func (h *Host) ConfigImage(metrics []string) (*ConfigImage, error) { return nil, ErrNotSupported }

// ConfigImage is a config image in C memory.
type ConfigImage struct{ impl any }

func (c *ConfigImage) Passes() (int, error) { return 0, ErrNotSupported } // GetNumOfPasses
func (c *ConfigImage) Size() int            { return 0 }
func (c *ConfigImage) Free()                {}

// Evaluate is cuptiProfilerHostEvaluateToGpuValues for sample index i; out has one slot per
// metric, in the order given to Session.CounterData.
func (h *Host) Evaluate(cd *CounterData, i int, out []float64) error { return ErrNotSupported }

// Session is one PM sampling object (cuptiPmSamplingEnable .. Disable) of a device.
type Session struct{ impl any }

func (l *Lib) Enable(dev int) (*Session, error)                  { return nil, ErrNotSupported }
func (s *Session) SetConfig(img *ConfigImage, c SetConfig) error { return ErrNotSupported }
func (s *Session) Start() error                                  { return ErrNotSupported }
func (s *Session) Stop() error                                   { return ErrNotSupported }
func (s *Session) Disable() error                                { return ErrNotSupported } // frees the object
func (s *Session) Decode(cd *CounterData) (DecodeResult, error) {
	return DecodeResult{}, ErrNotSupported
}

// CounterData is a counter data image in C memory for a fixed metric list and capacity.
type CounterData struct{ impl any }

// NewCounterData queries GetCounterDataSize for (metrics, maxSamples), allocates and initialises it.
func (s *Session) NewCounterData(metrics []string, maxSamples int) (*CounterData, error) {
	return nil, ErrNotSupported
}
func (cd *CounterData) Reset() error                   { return ErrNotSupported } // CounterDataImageInitialize
func (cd *CounterData) Info() (CounterDataInfo, error) { return CounterDataInfo{}, ErrNotSupported }
func (cd *CounterData) SampleTimes(i int) (start, end uint64, err error) {
	return 0, 0, ErrNotSupported
}
func (cd *CounterData) Size() int { return 0 }
func (cd *CounterData) Free()     {}

// Timestamp is cuptiGetTimestamp (ns, same time base as sample timestamps).
func (l *Lib) Timestamp() (uint64, error) { return 0, ErrNotSupported }
