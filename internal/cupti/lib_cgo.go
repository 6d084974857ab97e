//go:build cgo

package cupti

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "loader.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

type cLib = C.cx_lib

// profilerReady records, per libcupti file, that cuptiProfilerInitialize ran in this process.
// It is never undone. On an H200 a cuptiProfilerInitialize after a DeInitialize returned 39
// (MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), and a second DeInitialize crashes real CUPTI, so the
// profiler stays initialised until the process exits and libcupti stays loaded (RTLD_NODELETE,
// loader.c): a Lib can then be closed and opened again any number of times.
var (
	profilerMu    sync.Mutex
	profilerReady = map[string]bool{}
)

func open(opts Options) (*Lib, error) {
	cands := candidates(opts, os.Getenv, globExisting)
	c := (*C.cx_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cx_lib{}))))
	var errs []string
	loaded := ""
	for _, cand := range cands {
		if err := openCupti(c, cand); err != nil {
			if cand.explicit || !errors.Is(err, errNotFound) {
				// An explicit path, or a library that loaded but is unusable (missing symbol): final.
				C.cx_close(c)
				C.free(unsafe.Pointer(c))
				return nil, err
			}
			errs = append(errs, err.Error())
			continue
		}
		loaded = cand.path
		break
	}
	if loaded == "" {
		C.free(unsafe.Pointer(c))
		return nil, fmt.Errorf("loading libcupti: %w: not found (tried %s); install the CUDA toolkit's CUPTI or "+
			"pip install nvidia-cuda-cupti, or set %s", ErrNotSupported, strings.Join(errs, "; "), EnvLibrary)
	}
	l := &Lib{c: c, path: loaded}
	if dir := C.GoString(&c.cupti_dir[0]); dir != "" && !strings.Contains(loaded, "/") {
		l.path = dir + "/" + cuptiSoname
	}
	if c.nvperf_host == nil {
		// The loader found libcupti: preload nvperf_host from its folder before any profiler call.
		l.preloadNVPerf(C.CX_NVPERF_HOST)
		if c.nvperf_host == nil {
			l.warnings = append(l.warnings, "libnvperf_host.so not found next to "+l.path+
				": libcupti will look for it on the loader path (CUPTI_ERROR_NOT_INITIALIZED if it cannot)")
		}
	}
	for i := C.int(C.CX_FN_REQUIRED_COUNT + 1); i < C.CX_FN_COUNT; i++ {
		if c.fn[i] == nil {
			l.missing = append(l.missing, C.GoString(C.cx_fn_name(i)))
		}
	}
	var v C.uint32_t
	if r := C.cx_get_version(c, &v); r != 0 {
		l.fail()
		return nil, l.callError("cuptiGetVersion", r)
	}
	l.version = uint32(v)
	if l.version < VersionPMSampling {
		l.fail()
		return nil, fmt.Errorf("loading %s: %w", l.path, &FeatureError{Feature: "PM sampling and the Profiler Host API", MinVersion: VersionPMSampling, Have: l.version})
	}
	if len(l.missing) > 0 {
		l.warnings = append(l.warnings, "optional CUPTI functions absent (CUPTI < 13.2): "+strings.Join(l.missing, ", "))
	}
	l.driverErr = l.openDriver(opts.CUDALibraryPath)
	if l.driverErr != nil {
		l.warnings = append(l.warnings, l.driverErr.Error())
	} else if err := l.profilerInit(); err != nil {
		l.fail()
		return nil, err
	}
	l.cleanup = runtime.AddCleanup(l, releaseLibQuietly, l.state())
	return l, nil
}

var errNotFound = errors.New("not found")

func openCupti(c *C.cx_lib, cand candidate) error {
	cpath := C.CString(cand.path)
	defer C.free(unsafe.Pointer(cpath))
	var cdir *C.char
	if cand.nvperfDir != "" {
		cdir = C.CString(cand.nvperfDir)
		defer C.free(unsafe.Pointer(cdir))
	}
	var ebuf [2048]C.char
	if C.cx_open_cupti(c, cpath, cdir, &ebuf[0], C.size_t(len(ebuf))) != 0 {
		msg := C.GoString(&ebuf[0])
		missing := c.cupti == nil
		C.cx_close(c)
		if missing {
			if cand.explicit {
				return fmt.Errorf("loading libcupti from %s: %s", cand.path, msg)
			}
			return fmt.Errorf("%s: %w (%s)", cand.path, errNotFound, msg)
		}
		return fmt.Errorf("loading libcupti from %s: %s; it is not a usable CUPTI 12.6+ library", cand.path, msg)
	}
	return nil
}

func (l *Lib) openDriver(path string) error {
	if path == "" {
		path = cudaSoname
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var ebuf [2048]C.char
	if C.cx_open_cuda(l.c, cpath, &ebuf[0], C.size_t(len(ebuf))) != 0 {
		return fmt.Errorf("loading the CUDA driver %s: %s; device calls are unavailable (is the NVIDIA driver installed "+
			"and mounted into the container?): %w", path, C.GoString(&ebuf[0]), ErrNotSupported)
	}
	if r := C.cx_cu_init(l.c); r != 0 {
		return &DriverError{Func: "cuInit", Code: int(r)}
	}
	return nil
}

func (l *Lib) profilerInit() error {
	profilerMu.Lock()
	defer profilerMu.Unlock()
	if !profilerReady[l.path] {
		p := C.CUpti_Profiler_Initialize_Params{structSize: C.CUpti_Profiler_Initialize_Params_STRUCT_SIZE}
		if err := l.callLoadingTarget(C.CX_FN_cuptiProfilerInitialize, unsafe.Pointer(&p)); err != nil {
			return err
		}
		profilerReady[l.path] = true
	}
	return nil
}

// preloadNVPerf loads the nvperf libraries named in which from libcupti's folder, when known;
// a library that cannot be loaded stays nil in l.c.
func (l *Lib) preloadNVPerf(which C.int) {
	dir := C.GoString(&l.c.cupti_dir[0])
	if dir == "" {
		return
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	var ebuf [1024]C.char
	C.cx_preload_nvperf(l.c, cdir, which, &ebuf[0], C.size_t(len(ebuf)))
}

// callLoadingTarget is call, except that a NOT_INITIALIZED result (CUPTI could not dlopen an
// nvperf library by its bare name) loads libnvperf_target.so from libcupti's folder and retries
// once. Open does not preload it: it costs about 100 MB of resident memory and CUPTI 13.0's PM
// sampling did not load it on an H200.
func (l *Lib) callLoadingTarget(id C.int, params unsafe.Pointer) error {
	err := l.call(id, params)
	var ce *CallError
	if errors.As(err, &ce) && ce.Result == ErrorNotInitialized && l.c.nvperf_target == nil {
		if l.preloadNVPerf(C.CX_NVPERF_TARGET); l.c.nvperf_target != nil {
			return l.call(id, params)
		}
	}
	return err
}

// libState is what releasing a Lib needs; the safety-net cleanup gets a copy, never the Lib.
type libState struct{ c *C.cx_lib }

func (l *Lib) state() libState { return libState{c: l.c} }

// releaseLib closes the libraries (the profiler stays initialised: see profilerReady). The
// cx_lib struct is zeroed, not freed: late cleanups of child handles then call nothing.
func releaseLib(s libState) error {
	C.cx_close(s.c)
	return nil
}

func releaseLibQuietly(s libState) { _ = releaseLib(s) }

// fail releases a Lib whose Open did not finish (nothing else has seen it).
func (l *Lib) fail() {
	C.cx_close(l.c)
	C.free(unsafe.Pointer(l.c))
	l.c = nil
	l.closed = true
}

func (l *Lib) close() error { return releaseLib(l.state()) }

// callError turns a non-zero result into a *CallError with CUPTI's own text.
func (l *Lib) callError(fn string, r C.CUptiResult) error {
	if r == 0 {
		return nil
	}
	e := &CallError{Func: fn, Result: Result(r)}
	if l != nil && l.c != nil {
		if s := C.cx_result_string(l.c, r); s != nil {
			e.Detail = C.GoString(s)
		}
	}
	return e
}

// call runs one params-shaped entry point and wraps its result.
func (l *Lib) call(id C.int, p unsafe.Pointer) error {
	return l.result(id, C.cx_call(l.c, id, p))
}

// result is the error of function id's result r (nil for success).
func (l *Lib) result(id C.int, r C.CUptiResult) error {
	if r == 0 { // the hot path (decode, evaluate per sample) builds no error text
		return nil
	}
	return l.callError(C.GoString(C.cx_fn_name(id)), r)
}

// Devices lists CUDA devices with name, UUID and PCI bus id.
func (l *Lib) Devices() ([]DeviceInfo, error) {
	if err := l.deviceUsable(); err != nil {
		return nil, err
	}
	var n C.int
	if r := C.cx_cu_device_count(l.c, &n); r != 0 {
		return nil, &DriverError{Func: "cuDeviceGetCount", Code: int(r)}
	}
	out := make([]DeviceInfo, 0, int(n))
	for i := 0; i < int(n); i++ {
		var (
			dev  C.CUdevice
			name [256]C.char
			pci  [64]C.char
			uuid [16]byte
			fn   *C.char
		)
		r := C.cx_cu_device_info(l.c, C.int(i), &dev, &name[0], C.int(len(name)), (*C.uchar)(unsafe.Pointer(&uuid[0])),
			&pci[0], C.int(len(pci)), &fn)
		if r != 0 {
			return nil, fmt.Errorf("device %d: %w", i, &DriverError{Func: C.GoString(fn), Code: int(r)})
		}
		out = append(out, DeviceInfo{Index: i, Name: C.GoString(&name[0]), UUID: FormatUUID(uuid),
			PCIBusID: strings.ToLower(C.GoString(&pci[0]))})
	}
	return out, nil
}

func (l *Lib) cuDevice(dev int) (C.CUdevice, error) {
	var (
		d    C.CUdevice
		name [8]C.char
		pci  [64]C.char
		uuid [16]byte
		fn   *C.char
	)
	if r := C.cx_cu_device_info(l.c, C.int(dev), &d, &name[0], C.int(len(name)), (*C.uchar)(unsafe.Pointer(&uuid[0])),
		&pci[0], C.int(len(pci)), &fn); r != 0 {
		return 0, fmt.Errorf("device %d: %w", dev, &DriverError{Func: C.GoString(fn), Code: int(r)})
	}
	return d, nil
}

var supportLevelNames = []string{"unknown", "unsupported", "disabled", "supported", "limited"}

// PMSamplingSupported runs cuptiProfilerDeviceSupported with api = PM_SAMPLING; the error
// names each unsupported aspect (architecture, vGPU, confidential compute, ...) and matches
// ErrNotSupported.
func (l *Lib) PMSamplingSupported(dev int) error {
	if err := l.deviceUsable(); err != nil {
		return err
	}
	d, err := l.cuDevice(dev)
	if err != nil {
		return err
	}
	p := C.CUpti_Profiler_DeviceSupported_Params{structSize: C.CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE,
		cuDevice: d, api: C.CUPTI_PROFILER_PM_SAMPLING}
	if err := l.call(C.CX_FN_cuptiProfilerDeviceSupported, unsafe.Pointer(&p)); err != nil {
		return err
	}
	ok := func(v C.CUpti_Profiler_Support_Level) bool {
		return v == C.CUPTI_PROFILER_CONFIGURATION_SUPPORTED ||
			(v == C.CUPTI_PROFILER_CONFIGURATION_LIMITED_SUPPORT && l.version >= VersionLimitedSupport)
	}
	if ok(p.isSupported) {
		return nil
	}
	aspects := []struct {
		name string
		v    C.CUpti_Profiler_Support_Level
		hint string
	}{
		{"architecture", p.architecture, "PM sampling needs Turing (compute capability 7.5) or later"},
		{"sli", p.sli, ""},
		{"vGPU", p.vGpu, "set the vGPU plugin parameter enable_profiling"},
		{"confidential compute", p.confidentialCompute, ""},
		{"CMP", p.cmp, ""},
		{"WSL", p.wsl, "profiling under WSL needs Windows 11"},
	}
	var bad []string
	for _, a := range aspects {
		if ok(a.v) {
			continue
		}
		s := a.name + " " + supportLevelNames[min(int(a.v), len(supportLevelNames)-1)]
		if a.hint != "" {
			s += " (" + a.hint + ")"
		}
		bad = append(bad, s)
	}
	if len(bad) == 0 {
		bad = append(bad, "isSupported "+supportLevelNames[min(int(p.isSupported), len(supportLevelNames)-1)])
	}
	return fmt.Errorf("cuptiProfilerDeviceSupported: device %d cannot PM sample: %s: %w", dev, strings.Join(bad, ", "), ErrNotSupported)
}

// ChipName is cuptiDeviceGetChipName (e.g. "GH100").
func (l *Lib) ChipName(dev int) (string, error) {
	if err := l.deviceUsable(); err != nil {
		return "", err
	}
	p := C.CUpti_Device_GetChipName_Params{structSize: C.CUpti_Device_GetChipName_Params_STRUCT_SIZE, deviceIndex: C.size_t(dev)}
	if err := l.call(C.CX_FN_cuptiDeviceGetChipName, unsafe.Pointer(&p)); err != nil {
		return "", err
	}
	return C.GoString(p.pChipName), nil
}

// CounterAvailability is the two-phase cuptiPmSamplingGetCounterAvailability.
func (l *Lib) CounterAvailability(dev int) ([]byte, error) {
	if err := l.deviceUsable(); err != nil {
		return nil, err
	}
	p := C.CUpti_PmSampling_GetCounterAvailability_Params{
		structSize:  C.CUpti_PmSampling_GetCounterAvailability_Params_STRUCT_SIZE,
		deviceIndex: C.size_t(dev),
	}
	if err := l.call(C.CX_FN_cuptiPmSamplingGetCounterAvailability, unsafe.Pointer(&p)); err != nil {
		return nil, err
	}
	n := p.counterAvailabilityImageSize
	buf := C.calloc(1, n+1)
	defer C.free(buf)
	p.pCounterAvailabilityImage = (*C.uint8_t)(buf)
	if err := l.call(C.CX_FN_cuptiPmSamplingGetCounterAvailability, unsafe.Pointer(&p)); err != nil {
		return nil, err
	}
	return C.GoBytes(buf, C.int(n)), nil
}

// SupportedChips is cuptiProfilerHostGetSupportedChips.
func (l *Lib) SupportedChips() ([]string, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	p := C.CUpti_Profiler_Host_GetSupportedChips_Params{structSize: C.CUpti_Profiler_Host_GetSupportedChips_Params_STRUCT_SIZE}
	if err := l.call(C.CX_FN_cuptiProfilerHostGetSupportedChips, unsafe.Pointer(&p)); err != nil {
		return nil, err
	}
	return goStrings((**C.char)(unsafe.Pointer(p.ppChipNames)), p.numChips), nil
}

// Timestamp is cuptiGetTimestamp (ns, same time base as sample timestamps).
func (l *Lib) Timestamp() (uint64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	var ts C.uint64_t
	if r := C.cx_get_timestamp(l.c, &ts); r != 0 {
		return 0, l.callError("cuptiGetTimestamp", r)
	}
	return uint64(ts), nil
}

// goStrings copies a CUPTI-owned array of C strings.
func goStrings(arr **C.char, n C.size_t) []string {
	if arr == nil || n == 0 {
		return nil
	}
	src := unsafe.Slice(arr, int(n))
	out := make([]string, len(src))
	for i, s := range src {
		out[i] = C.GoString(s)
	}
	return out
}

// cStrings copies names into one C array of C strings; free it with freeCStrings.
func cStrings(names []string) **C.char {
	arr := (**C.char)(C.calloc(C.size_t(len(names)+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	s := unsafe.Slice(arr, len(names)+1)
	for i, n := range names {
		s[i] = C.CString(n)
	}
	return arr
}

func freeCStrings(arr **C.char, n int) {
	if arr == nil {
		return
	}
	for _, p := range unsafe.Slice(arr, n) {
		C.free(unsafe.Pointer(p))
	}
	C.free(unsafe.Pointer(arr))
}
