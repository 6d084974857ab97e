//go:build !cgo

package cupti

// The !cgo twin: the package builds with CGO_ENABLED=0 and Open reports ErrNotSupported.

import (
	"fmt"
	"time"
)

type (
	cLib         struct{}
	cHost        struct{}
	cBuf         struct{}
	cSession     struct{}
	cCounterData struct{}
)

// Decoder and Batch: decoder_cgo.go.
type (
	Decoder struct{}
	Batch   struct {
		Decode                                      DecodeResult
		DecodeErr, InfoErr, ResetErr                error
		Info                                        CounterDataInfo
		Reset                                       bool
		DecodeTime, SampleInfo, Evaluate, ResetTime time.Duration
		Samples                                     int
	}
)

func (s *Session) NewDecoder() (*Decoder, error)                           { return nil, errNoCgo }
func (d *Decoder) Run(*Session, *CounterData, *Host, bool) (*Batch, error) { return nil, errNoCgo }
func (d *Decoder) Close()                                                  {}
func (d *Decoder) CPU() time.Duration                                      { return 0 }
func (b *Batch) Sample(int) (uint64, uint64, []float64, error, error) {
	return 0, 0, nil, errNoCgo, nil
}

var errNoCgo = fmt.Errorf("cupti: built without cgo: %w", ErrNotSupported)

func open(Options) (*Lib, error) { return nil, errNoCgo }
func (l *Lib) close() error      { return nil }

func (l *Lib) Devices() ([]DeviceInfo, error)                          { return nil, errNoCgo }
func (l *Lib) PMSamplingSupported(int) error                           { return errNoCgo }
func (l *Lib) ChipName(int) (string, error)                            { return "", errNoCgo }
func (l *Lib) CounterAvailability(int) ([]byte, error)                 { return nil, errNoCgo }
func (l *Lib) SupportedChips() ([]string, error)                       { return nil, errNoCgo }
func (l *Lib) Timestamp() (uint64, error)                              { return 0, errNoCgo }
func (l *Lib) NewHost(string, []byte) (*Host, error)                   { return nil, errNoCgo }
func (l *Lib) NewHostForSet(string, string, []byte) (*Host, error)     { return nil, errNoCgo }
func (l *Lib) SinglePassSets(string) ([]string, error)                 { return nil, errNoCgo }
func (l *Lib) MetricsInSinglePassSet(string, string) ([]string, error) { return nil, errNoCgo }
func (h *Host) SinglePassSet() string                                  { return "" }
func (l *Lib) Enable(int) (*Session, error)                            { return nil, errNoCgo }
func (h *Host) Close() error                                           { return nil }
func (h *Host) Chip() string                                           { return "" }
func (h *Host) BaseMetrics(MetricType) ([]string, error)               { return nil, errNoCgo }
func (h *Host) SubMetrics(MetricType, string) ([]string, error)        { return nil, errNoCgo }
func (h *Host) Properties(string) (MetricProperties, error)            { return MetricProperties{}, errNoCgo }
func (h *Host) MaxMetricsPerPass() (int, error)                        { return 0, errNoCgo }
func (h *Host) ConfigImage([]string) (*ConfigImage, error)             { return nil, errNoCgo }
func (h *Host) Evaluate(*CounterData, int, []float64) error            { return errNoCgo }
func (c *ConfigImage) Passes() (int, error)                            { return 0, errNoCgo }
func (c *ConfigImage) Size() int                                       { return 0 }
func (c *ConfigImage) Free()                                           {}
func (s *Session) Device() int                                         { return 0 }
func (s *Session) SetConfig(*ConfigImage, SetConfig) error             { return errNoCgo }
func (s *Session) Start() error                                        { return errNoCgo }
func (s *Session) Stop() error                                         { return errNoCgo }
func (s *Session) Disable() error                                      { return nil }
func (s *Session) Decode(*CounterData) (DecodeResult, error)           { return DecodeResult{}, errNoCgo }
func (s *Session) NewCounterData([]string, int) (*CounterData, error)  { return nil, errNoCgo }
func (cd *CounterData) Reset() error                                   { return errNoCgo }
func (cd *CounterData) Info() (CounterDataInfo, error)                 { return CounterDataInfo{}, errNoCgo }
func (cd *CounterData) SampleTimes(int) (uint64, uint64, error)        { return 0, 0, errNoCgo }
func (cd *CounterData) Size() int                                      { return 0 }
func (cd *CounterData) Free()                                          {}
