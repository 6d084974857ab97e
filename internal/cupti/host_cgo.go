//go:build cgo

package cupti

/*
#include <stdlib.h>
#include <string.h>
#include "loader.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// cHost is the C side of a Host: the host object and the C copies it was made from.
type cHost struct {
	lib   *C.cx_lib
	obj   *C.CUpti_Profiler_Host_Object
	chip  *C.char
	avail *C.uint8_t // nil when no availability image was given
	set   *C.char    // the single-pass metric set (13.2+), nil for none
}

type cBuf = C.cx_buf

// NewHost is cuptiProfilerHostInitialize with profilerType PM_SAMPLING. availability may be nil
// (host-only use from a chip name).
func (l *Lib) NewHost(chip string, availability []byte) (*Host, error) {
	return l.newHost(chip, "", availability)
}

// NewHostForSet is NewHost for sampling the named single-pass metric set (see SinglePassSets):
// HostInitialize gets the set in pSinglePassMetricSetName, with the 13.2 STRUCT_SIZE 56, and so
// does every host object its ConfigImage makes. An empty set is NewHost. The field needs CUPTI
// API 130200: an older library gets a *FeatureError matching ErrNotSupported and no call.
func (l *Lib) NewHostForSet(chip, set string, availability []byte) (*Host, error) {
	if set != "" && l.usable() == nil && l.version < VersionSinglePassSets {
		return nil, fmt.Errorf("profiler host for chip %s, single-pass set %q: %w", chip, set,
			&FeatureError{Feature: singlePassSetsFeature, MinVersion: VersionSinglePassSets, Have: l.version})
	}
	return l.newHost(chip, set, availability)
}

func (l *Lib) newHost(chip, set string, availability []byte) (*Host, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	c := &cHost{lib: l.c, chip: C.CString(chip)}
	if len(availability) > 0 {
		c.avail = (*C.uint8_t)(C.CBytes(availability))
	}
	if set != "" {
		c.set = C.CString(set)
	}
	obj, err := l.hostInit(c)
	if err != nil {
		freeHost(*c)
		if set != "" {
			return nil, fmt.Errorf("profiler host for chip %s, single-pass set %q: %w", chip, set, err)
		}
		return nil, fmt.Errorf("profiler host for chip %s: %w", chip, err)
	}
	c.obj = obj
	h := &Host{l: l, c: c, chip: chip, set: set}
	h.cleanup = runtime.AddCleanup(h, freeHost, *c)
	return h, nil
}

// hostInit sends the 13.0 params (STRUCT_SIZE 48), or the 13.2 ones (56) when a set is named.
func (l *Lib) hostInit(c *cHost) (*C.CUpti_Profiler_Host_Object, error) {
	p := C.cx_Host_Initialize_Params_13_2{
		v13_0: C.CUpti_Profiler_Host_Initialize_Params{
			structSize:                C.CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE,
			profilerType:              C.CUPTI_PROFILER_TYPE_PM_SAMPLING,
			pChipName:                 c.chip,
			pCounterAvailabilityImage: c.avail,
		},
	}
	if c.set != nil {
		p.v13_0.structSize = C.CX_HOST_INITIALIZE_STRUCT_SIZE_13_2
		p.pSinglePassMetricSetName = c.set
	}
	if err := l.callLoadingTarget(C.CX_FN_cuptiProfilerHostInitialize, unsafe.Pointer(&p)); err != nil {
		return nil, err
	}
	return p.v13_0.pHostObject, nil
}

func hostDeinit(lib *C.cx_lib, obj *C.CUpti_Profiler_Host_Object) C.CUptiResult {
	p := C.CUpti_Profiler_Host_Deinitialize_Params{structSize: C.CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE, pHostObject: obj}
	return C.cx_call(lib, C.CX_FN_cuptiProfilerHostDeinitialize, unsafe.Pointer(&p))
}

func freeHost(c cHost) {
	if c.obj != nil {
		hostDeinit(c.lib, c.obj)
	}
	C.free(unsafe.Pointer(c.chip))
	C.free(unsafe.Pointer(c.avail))
	C.free(unsafe.Pointer(c.set))
}

func (h *Host) usable() error {
	if h == nil || h.c == nil {
		return ErrClosed
	}
	return h.l.usable()
}

// Close is cuptiProfilerHostDeinitialize; it frees the C copies. Idempotent.
func (h *Host) Close() error {
	if h == nil || h.c == nil {
		return nil
	}
	h.cleanup.Stop()
	c := *h.c
	h.c = nil
	var err error
	if !h.l.closed {
		err = h.l.callError("cuptiProfilerHostDeinitialize", hostDeinit(c.lib, c.obj))
	}
	c.obj = nil
	freeHost(c)
	return err
}

// Chip is the chip name the host was made for.
func (h *Host) Chip() string { return h.chip }

// SinglePassSet is the set the host was made for (NewHostForSet), "" for none.
func (h *Host) SinglePassSet() string { return h.set }

// BaseMetrics is cuptiProfilerHostGetBaseMetrics for one metric type (names copied).
func (h *Host) BaseMetrics(t MetricType) ([]string, error) {
	if err := h.usable(); err != nil {
		return nil, err
	}
	p := C.CUpti_Profiler_Host_GetBaseMetrics_Params{structSize: C.CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE,
		pHostObject: h.c.obj, metricType: C.CUpti_MetricType(t)}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostGetBaseMetrics, unsafe.Pointer(&p)); err != nil {
		return nil, err
	}
	return goStrings(p.ppMetricNames, p.numMetrics), nil
}

// SubMetrics is cuptiProfilerHostGetSubMetrics: the suffixes (rollups and submetrics) a base
// metric of type t accepts, as CUPTI spells them.
func (h *Host) SubMetrics(t MetricType, base string) ([]string, error) {
	if err := h.usable(); err != nil {
		return nil, err
	}
	name := C.CString(base)
	defer C.free(unsafe.Pointer(name))
	p := C.CUpti_Profiler_Host_GetSubMetrics_Params{structSize: C.CUpti_Profiler_Host_GetSubMetrics_Params_STRUCT_SIZE,
		pHostObject: h.c.obj, metricType: C.CUpti_MetricType(t), pMetricName: name}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostGetSubMetrics, unsafe.Pointer(&p)); err != nil {
		return nil, fmt.Errorf("%s: %w", base, err)
	}
	return goStrings(p.ppSubMetrics, p.numOfSubmetrics), nil
}

// Properties is cuptiProfilerHostGetMetricProperties (strings copied).
func (h *Host) Properties(metric string) (MetricProperties, error) {
	if err := h.usable(); err != nil {
		return MetricProperties{}, err
	}
	name := C.CString(metric)
	defer C.free(unsafe.Pointer(name))
	p := C.CUpti_Profiler_Host_GetMetricProperties_Params{
		structSize:  C.CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE,
		pHostObject: h.c.obj, pMetricName: name}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostGetMetricProperties, unsafe.Pointer(&p)); err != nil {
		return MetricProperties{}, fmt.Errorf("%s: %w", metric, err)
	}
	return MetricProperties{Name: metric, Description: C.GoString(p.pDescription), HWUnit: C.GoString(p.pHwUnit),
		DimUnit: C.GoString(p.pDimUnit), Type: MetricType(p.metricType)}, nil
}

// MaxMetricsPerPass is cuptiProfilerHostGetMaxNumHardwareMetricsPerPass for PM sampling.
func (h *Host) MaxMetricsPerPass() (int, error) {
	if err := h.usable(); err != nil {
		return 0, err
	}
	p := C.CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params{
		structSize:   C.CUpti_Profiler_Host_GetMaxNumHardwareMetricsPerPass_Params_STRUCT_SIZE,
		profilerType: C.CUPTI_PROFILER_TYPE_PM_SAMPLING, pChipName: h.c.chip, pCounterAvailabilityImage: h.c.avail}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostGetMaxNumHardwareMetricsPerPass, unsafe.Pointer(&p)); err != nil {
		return 0, err
	}
	return int(p.maxMetricsPerPass), nil
}

// ConfigImage builds a config image for the metrics (ConfigAddMetrics, GetConfigImageSize,
// GetConfigImage) on a fresh host object, so calls are independent. The image is C memory that
// CUPTI keeps from SetConfig until Disable; the Session holds a reference for that long.
func (h *Host) ConfigImage(metrics []string) (*ConfigImage, error) {
	if err := h.usable(); err != nil {
		return nil, err
	}
	if len(metrics) == 0 {
		return nil, fmt.Errorf("config image: no metrics")
	}
	obj, err := h.l.hostInit(h.c)
	if err != nil {
		return nil, err
	}
	defer hostDeinit(h.l.c, obj)
	names := cStrings(metrics)
	defer freeCStrings(names, len(metrics))
	add := C.CUpti_Profiler_Host_ConfigAddMetrics_Params{structSize: C.CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE,
		pHostObject: obj, ppMetricNames: names, numMetrics: C.size_t(len(metrics))}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostConfigAddMetrics, unsafe.Pointer(&add)); err != nil {
		return nil, err
	}
	sz := C.CUpti_Profiler_Host_GetConfigImageSize_Params{structSize: C.CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE,
		pHostObject: obj}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostGetConfigImageSize, unsafe.Pointer(&sz)); err != nil {
		return nil, err
	}
	buf := C.cx_buf_new(sz.configImageSize)
	if buf == nil {
		return nil, fmt.Errorf("config image: allocating %d bytes: %w", sz.configImageSize, ErrOutOfMemory)
	}
	img := C.CUpti_Profiler_Host_GetConfigImage_Params{structSize: C.CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE,
		pHostObject: obj, configImageSize: buf.n, pConfigImage: buf.p}
	if err := h.l.call(C.CX_FN_cuptiProfilerHostGetConfigImage, unsafe.Pointer(&img)); err != nil {
		C.cx_buf_unref(buf)
		return nil, err
	}
	ci := &ConfigImage{l: h.l, buf: buf, metrics: append([]string(nil), metrics...)}
	ci.cleanup = runtime.AddCleanup(ci, unrefBuf, buf)
	return ci, nil
}

func unrefBuf(b *C.cx_buf) { C.cx_buf_unref(b) }

// Passes is cuptiProfilerHostGetNumOfPasses; PM sampling needs 1.
func (c *ConfigImage) Passes() (int, error) {
	if c == nil || c.buf == nil {
		return 0, ErrClosed
	}
	if err := c.l.usable(); err != nil {
		return 0, err
	}
	p := C.CUpti_Profiler_Host_GetNumOfPasses_Params{structSize: C.CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE,
		configImageSize: c.buf.n, pConfigImage: c.buf.p}
	if err := c.l.call(C.CX_FN_cuptiProfilerHostGetNumOfPasses, unsafe.Pointer(&p)); err != nil {
		return 0, err
	}
	return int(p.numOfPasses), nil
}

// Size is the image's size in bytes (0 once freed).
func (c *ConfigImage) Size() int {
	if c == nil || c.buf == nil {
		return 0
	}
	return int(c.buf.n)
}

// Free drops this handle's reference; a Session configured with it keeps the memory until Disable.
func (c *ConfigImage) Free() {
	if c == nil || c.buf == nil {
		return
	}
	c.cleanup.Stop()
	C.cx_buf_unref(c.buf)
	c.buf = nil
}

// Evaluate is cuptiProfilerHostEvaluateToGpuValues for sample index i; out has one slot per
// metric, in the order given to Session.NewCounterData.
func (h *Host) Evaluate(cd *CounterData, i int, out []float64) error {
	if err := h.usable(); err != nil {
		return err
	}
	if cd == nil || cd.c == nil {
		return ErrClosed
	}
	if len(out) < len(cd.metrics) {
		return fmt.Errorf("evaluate: output has %d slots for %d metrics", len(out), len(cd.metrics))
	}
	if i < 0 {
		return fmt.Errorf("evaluate: sample index %d", i)
	}
	// The params live on the C stack (loader.h): no allocation a sample, and out, passed as an
	// argument, needs no pinning.
	r := C.cx_evaluate(h.l.c, h.c.obj, cd.c.img, cd.c.size, C.size_t(i), cd.c.names, C.size_t(len(cd.metrics)),
		(*C.double)(unsafe.Pointer(&out[0])))
	return h.l.result(C.CX_FN_cuptiProfilerHostEvaluateToGpuValues, r)
}
