package cupti

import (
	"runtime"
	"strings"
)

// This file holds the exported handles and the checks that need no cgo. The calls into CUPTI are
// in lib_cgo.go, host_cgo.go and session_cgo.go; nocgo.go is the !cgo twin.

// Lib is a loaded libcupti + libcuda pair (see Open). Its methods are meant for one goroutine at
// a time; pmsample calls them from one OS-locked goroutine per device.
type Lib struct {
	c         *cLib
	path      string
	version   uint32
	missing   []string // optional symbols absent from this libcupti
	warnings  []string
	driverErr error // libcuda or cuInit failed: device calls return it, host calls still work
	closed    bool
	cleanup   runtime.Cleanup
}

// Open loads the libraries, preloads nvperf from libcupti's folder, resolves every required
// symbol (a missing one fails Open, naming it with dlerror's text), calls cuInit(0) and
// cuptiProfilerInitialize (once per process, reference-counted over open Libs).
//
// Search order for libcupti: opts.LibraryPath, else $CUPTI_EXPORTER_CUPTI_LIBRARY (a file or a
// folder; when given, nothing else is tried); then the loader's own path (dlopen("libcupti.so.13"));
// then /usr/local/cuda/extras/CUPTI/lib64, /usr/local/cuda/targets/x86_64-linux/lib,
// /usr/local/cuda-13*/targets/x86_64-linux/lib and pip wheels' site-packages/nvidia/cu13/lib.
//
// libcuda (opts.CUDALibraryPath, else "libcuda.so.1") failing to load or cuInit failing does not
// fail Open: host-only calls (NewHost from a chip name, SupportedChips) still work, and device
// calls return DriverError.
func Open(opts Options) (*Lib, error) { return open(opts) }

// Close calls cuptiProfilerDeInitialize when it is the last open Lib and releases the handles.
// Handles made from the Lib must be closed first. Close is idempotent.
func (l *Lib) Close() error {
	if l == nil || l.closed {
		return nil
	}
	l.closed = true
	l.cleanup.Stop()
	return l.close()
}

// Version is cuptiGetVersion (e.g. 130001).
func (l *Lib) Version() uint32 { return l.version }

// Path is the file libcupti was loaded from (or the soname, when the loader found it and the
// folder could not be determined).
func (l *Lib) Path() string { return l.path }

// HasSinglePassSets reports whether the 13.2 single-pass-set queries can be called: it gates on
// both the version (API 130200 or later) and the symbols (resolved by dlsym at Open).
func (l *Lib) HasSinglePassSets() bool {
	return l.version >= VersionSinglePassSets && len(l.missing) == 0
}

// MissingOptional lists optional symbols this libcupti lacks (nil when it has them all).
func (l *Lib) MissingOptional() []string { return l.missing }

// Warnings are problems found at Open that did not fail it (nvperf not preloaded, driver absent,
// optional symbols missing), for logging.
func (l *Lib) Warnings() []string { return l.warnings }

// DriverError is why device calls cannot work (libcuda absent, cuInit failed), or nil.
func (l *Lib) DriverError() error { return l.driverErr }

func (l *Lib) usable() error {
	if l == nil || l.closed {
		return ErrClosed
	}
	return nil
}

func (l *Lib) deviceUsable() error {
	if err := l.usable(); err != nil {
		return err
	}
	return l.driverErr
}

// Host is a Profiler Host object for PM sampling of one chip. It owns C memory; Close frees it.
type Host struct {
	l       *Lib
	c       *cHost
	chip    string
	set     string // single-pass metric set (NewHostForSet), "" for none
	cleanup runtime.Cleanup
}

// ConfigImage is a config image in C memory. A Session that uses it keeps its own reference, so
// Free may be called once SetConfig has returned; the memory goes when both let go.
type ConfigImage struct {
	l       *Lib
	buf     *cBuf
	metrics []string
	cleanup runtime.Cleanup
}

// Metrics are the metric names the image was built for.
func (c *ConfigImage) Metrics() []string { return c.metrics }

// Session is one PM sampling object (cuptiPmSamplingEnable .. Disable) of a device.
//
// A Session must be owned by one goroutine that called runtime.LockOSThread, and every call on
// it, its CounterData and the Host that evaluates them, must come from that goroutine: CUPTI
// documents no thread safety for these calls, and NVIDIA's sample keeps decode on one thread.
type Session struct {
	l       *Lib
	c       *cSession
	dev     int
	cleanup runtime.Cleanup
}

// CounterData is a counter data image in C memory for a fixed metric list and capacity.
type CounterData struct {
	s        *Session
	c        *cCounterData
	metrics  []string
	capacity int // samples it holds
	cleanup  runtime.Cleanup
}

// Metrics are the metric names, in the order Evaluate fills its output.
func (cd *CounterData) Metrics() []string { return cd.metrics }

// FormatUUID renders the 16 bytes of CUuuid as "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func FormatUUID(b [16]byte) string {
	const hex = "0123456789abcdef"
	var sb strings.Builder
	sb.WriteString("GPU-")
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			sb.WriteByte('-')
		}
		sb.WriteByte(hex[c>>4])
		sb.WriteByte(hex[c&15])
	}
	return sb.String()
}
