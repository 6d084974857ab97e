//go:build cgo

package cupti

/*
#include <stdlib.h>
#include "loader.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// cSession is what a Session's release needs.
type cSession struct {
	lib *C.cx_lib
	obj *C.CUpti_PmSampling_Object
	img *C.cx_buf // the config image referenced since SetConfig
}

// Enable is cuptiPmSamplingEnable for a CUDA device ordinal.
func (l *Lib) Enable(dev int) (*Session, error) {
	if err := l.deviceUsable(); err != nil {
		return nil, err
	}
	p := C.CUpti_PmSampling_Enable_Params{structSize: C.CUpti_PmSampling_Enable_Params_STRUCT_SIZE, deviceIndex: C.size_t(dev)}
	if err := l.callLoadingTarget(C.CX_FN_cuptiPmSamplingEnable, unsafe.Pointer(&p)); err != nil {
		return nil, fmt.Errorf("device %d: %w", dev, err)
	}
	s := &Session{l: l, dev: dev, c: &cSession{lib: l.c, obj: p.pPmSamplingObject}}
	s.cleanup = runtime.AddCleanup(s, releaseSession, s.c)
	return s, nil
}

// releaseSession is the safety net for a Session dropped without Disable.
func releaseSession(c *cSession) {
	st := C.CUpti_PmSampling_Stop_Params{structSize: C.CUpti_PmSampling_Stop_Params_STRUCT_SIZE, pPmSamplingObject: c.obj}
	C.cx_call(c.lib, C.CX_FN_cuptiPmSamplingStop, unsafe.Pointer(&st))
	d := C.CUpti_PmSampling_Disable_Params{structSize: C.CUpti_PmSampling_Disable_Params_STRUCT_SIZE, pPmSamplingObject: c.obj}
	C.cx_call(c.lib, C.CX_FN_cuptiPmSamplingDisable, unsafe.Pointer(&d))
	if c.img != nil {
		C.cx_buf_unref(c.img)
	}
}

func (s *Session) usable() error {
	if s == nil || s.c == nil {
		return ErrClosed
	}
	return s.l.usable()
}

// Device is the CUDA ordinal the session samples.
func (s *Session) Device() int { return s.dev }

// SetConfig is cuptiPmSamplingSetConfig. The session keeps a reference to img until Disable.
// KeepLatest needs CUPTI API 26 (12.8); before it the params end at triggerMode.
func (s *Session) SetConfig(img *ConfigImage, c SetConfig) error {
	if err := s.usable(); err != nil {
		return err
	}
	if img == nil || img.buf == nil {
		return fmt.Errorf("cuptiPmSamplingSetConfig: config image: %w", ErrClosed)
	}
	p := C.CUpti_PmSampling_SetConfig_Params{
		structSize:         C.CUpti_PmSampling_SetConfig_Params_STRUCT_SIZE,
		pPmSamplingObject:  s.c.obj,
		configSize:         img.buf.n,
		pConfig:            img.buf.p,
		hardwareBufferSize: C.size_t(c.HardwareBufferSize),
		samplingInterval:   C.uint64_t(c.Interval),
		triggerMode:        C.CUpti_PmSampling_TriggerMode(c.Trigger),
	}
	if s.l.version < VersionAppendMode {
		if c.KeepLatest {
			return &FeatureError{Feature: "PM sampling keep-latest buffer mode", MinVersion: VersionAppendMode, Have: s.l.version}
		}
		p.structSize = C.CX_SETCONFIG_STRUCT_SIZE_PRE_APPEND_MODE
	} else if c.KeepLatest {
		p.hwBufferAppendMode = C.CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST
	}
	if err := s.l.call(C.CX_FN_cuptiPmSamplingSetConfig, unsafe.Pointer(&p)); err != nil {
		return fmt.Errorf("device %d: %w", s.dev, err)
	}
	C.cx_buf_ref(img.buf)
	if s.c.img != nil {
		C.cx_buf_unref(s.c.img)
	}
	s.c.img = img.buf
	return nil
}

func (s *Session) objCall(id C.int) error {
	if err := s.usable(); err != nil {
		return err
	}
	// Start, Stop and Disable share one layout.
	p := C.CUpti_PmSampling_Start_Params{structSize: C.CUpti_PmSampling_Start_Params_STRUCT_SIZE, pPmSamplingObject: s.c.obj}
	if err := s.l.call(id, unsafe.Pointer(&p)); err != nil {
		return fmt.Errorf("device %d: %w", s.dev, err)
	}
	return nil
}

// Start is cuptiPmSamplingStart.
func (s *Session) Start() error { return s.objCall(C.CX_FN_cuptiPmSamplingStart) }

// Stop is cuptiPmSamplingStop; decode once more afterwards to drain.
func (s *Session) Stop() error { return s.objCall(C.CX_FN_cuptiPmSamplingStop) }

// Disable is cuptiPmSamplingDisable: it destroys the object and drops the config image
// reference. The Session is unusable afterwards, even when Disable fails.
func (s *Session) Disable() error {
	if s == nil || s.c == nil {
		return nil
	}
	err := s.objCall(C.CX_FN_cuptiPmSamplingDisable)
	s.cleanup.Stop()
	if s.c.img != nil {
		C.cx_buf_unref(s.c.img)
	}
	s.c = nil
	return err
}

// Decode is cuptiPmSamplingDecodeData into cd. On a hardware-buffer overflow the result has
// Overflow set and the error matches ErrOutOfMemory: in keep-oldest mode the session is dead and
// must be recreated.
func (s *Session) Decode(cd *CounterData) (DecodeResult, error) {
	if err := s.usable(); err != nil {
		return DecodeResult{}, err
	}
	if cd == nil || cd.c == nil {
		return DecodeResult{}, ErrClosed
	}
	r := C.cx_decode(s.l.c, s.c.obj, cd.c.img, cd.c.size)
	res := DecodeResult{StopReason: DecodeStopReason(r.stop_reason), Overflow: r.overflow != 0}
	if err := s.l.result(C.CX_FN_cuptiPmSamplingDecodeData, r.r); err != nil {
		return res, fmt.Errorf("device %d: %w", s.dev, err)
	}
	return res, nil
}

// cCounterData is the C side of a CounterData.
type cCounterData struct {
	lib   *C.cx_lib
	obj   *C.CUpti_PmSampling_Object
	names **C.char
	n     int
	img   *C.uint8_t
	size  C.size_t
}

func freeCounterData(c *cCounterData) {
	freeCStrings(c.names, c.n)
	C.free(unsafe.Pointer(c.img))
}

// NewCounterData queries GetCounterDataSize for (metrics, maxSamples), allocates the image in C
// memory and initialises it.
func (s *Session) NewCounterData(metrics []string, maxSamples int) (*CounterData, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	if len(metrics) == 0 || maxSamples <= 0 || maxSamples > 1<<31 {
		return nil, fmt.Errorf("counter data: %d metrics, %d samples", len(metrics), maxSamples)
	}
	c := &cCounterData{lib: s.l.c, obj: s.c.obj, names: cStrings(metrics), n: len(metrics)}
	p := C.CUpti_PmSampling_GetCounterDataSize_Params{
		structSize:        C.CUpti_PmSampling_GetCounterDataSize_Params_STRUCT_SIZE,
		pPmSamplingObject: s.c.obj, pMetricNames: c.names, numMetrics: C.size_t(len(metrics)),
		maxSamples: C.uint32_t(maxSamples)}
	if err := s.l.call(C.CX_FN_cuptiPmSamplingGetCounterDataSize, unsafe.Pointer(&p)); err != nil {
		freeCounterData(c)
		return nil, fmt.Errorf("device %d: %w", s.dev, err)
	}
	c.size = p.counterDataSize
	c.img = (*C.uint8_t)(C.calloc(1, c.size))
	if c.img == nil {
		freeCounterData(c)
		return nil, fmt.Errorf("counter data: allocating %d bytes: %w", c.size, ErrOutOfMemory)
	}
	cd := &CounterData{s: s, c: c, metrics: append([]string(nil), metrics...), capacity: maxSamples}
	if err := cd.Reset(); err != nil {
		freeCounterData(c)
		return nil, err
	}
	cd.cleanup = runtime.AddCleanup(cd, freeCounterData, c)
	return cd, nil
}

func (cd *CounterData) usable() error {
	if cd == nil || cd.c == nil {
		return ErrClosed
	}
	return cd.s.usable()
}

// Reset is cuptiPmSamplingCounterDataImageInitialize (also the reset between decode batches).
func (cd *CounterData) Reset() error {
	if err := cd.usable(); err != nil {
		return err
	}
	return cd.s.l.result(C.CX_FN_cuptiPmSamplingCounterDataImageInitialize, C.cx_counter_data_init(cd.s.l.c, cd.s.c.obj, cd.c.img, cd.c.size))
}

// Info is cuptiPmSamplingGetCounterDataInfo.
func (cd *CounterData) Info() (CounterDataInfo, error) {
	if err := cd.usable(); err != nil {
		return CounterDataInfo{}, err
	}
	r := C.cx_counter_data_info(cd.s.l.c, cd.c.img, cd.c.size)
	if err := cd.s.l.result(C.CX_FN_cuptiPmSamplingGetCounterDataInfo, r.r); err != nil {
		return CounterDataInfo{}, err
	}
	return CounterDataInfo{Total: int(r.total), Populated: int(r.populated), Completed: int(r.completed)}, nil
}

// SampleTimes is cuptiPmSamplingCounterDataGetSampleInfo: the start and end of sample i in ns
// on cuptiGetTimestamp's clock.
func (cd *CounterData) SampleTimes(i int) (start, end uint64, err error) {
	if err := cd.usable(); err != nil {
		return 0, 0, err
	}
	if i < 0 {
		return 0, 0, fmt.Errorf("sample info: sample index %d", i)
	}
	// The params live on the C stack: no allocation a sample (loader.h).
	res := C.cx_sample_info(cd.s.l.c, cd.s.c.obj, cd.c.img, cd.c.size, C.size_t(i))
	if err := cd.s.l.result(C.CX_FN_cuptiPmSamplingCounterDataGetSampleInfo, res.r); err != nil {
		return 0, 0, err
	}
	return uint64(res.start), uint64(res.end), nil
}

// Size is the image's size in bytes (0 once freed).
func (cd *CounterData) Size() int {
	if cd == nil || cd.c == nil {
		return 0
	}
	return int(cd.c.size)
}

// Free releases the image's C memory. Idempotent.
func (cd *CounterData) Free() {
	if cd == nil || cd.c == nil {
		return
	}
	cd.cleanup.Stop()
	freeCounterData(cd.c)
	cd.c = nil
}
