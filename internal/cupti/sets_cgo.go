//go:build cgo

package cupti

/*
#include <stdlib.h>
#include "loader.h"
*/
import "C"

import (
	"bytes"
	"fmt"
	"unsafe"
)

// The CUPTI 13.2 named single-pass metric sets (REFERENCE.md §2.4): two host queries that take a
// chip name and no host object, and the set name HostInitialize then takes.

const singlePassSetsFeature = "the single-pass metric set API"

// singlePassSetsError is why the set queries cannot be called, or nil. Both gates matter: the
// symbols are resolved by dlsym at Open, and the version says the library documents them.
func (l *Lib) singlePassSetsError() error {
	if err := l.usable(); err != nil {
		return err
	}
	if l.HasSinglePassSets() {
		return nil
	}
	return &FeatureError{Feature: singlePassSetsFeature, MinVersion: VersionSinglePassSets, Have: l.version, Missing: l.missing}
}

// SinglePassSets is the two-phase cuptiProfilerHostGetSinglePassSets: the names of the chip's
// single-pass metric sets. Without the 13.2 queries it returns a *FeatureError matching
// ErrNotSupported.
func (l *Lib) SinglePassSets(chip string) ([]string, error) {
	if err := l.singlePassSetsError(); err != nil {
		return nil, fmt.Errorf("listing single-pass sets of %s: %w", chip, err)
	}
	cchip := C.CString(chip)
	defer C.free(unsafe.Pointer(cchip))
	p := C.CUpti_Profiler_Host_GetSinglePassSets_Params{
		structSize: C.CUpti_Profiler_Host_GetSinglePassSets_Params_STRUCT_SIZE, pChipName: cchip}
	if err := l.call(C.CX_FN_cuptiProfilerHostGetSinglePassSets, unsafe.Pointer(&p)); err != nil { // count
		return nil, fmt.Errorf("listing single-pass sets of %s: %w", chip, err)
	}
	n := p.numOfSinglePassSets
	if n == 0 {
		return []string{}, nil
	}
	arr := (**C.char)(C.calloc(n, C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	defer C.free(unsafe.Pointer(arr))
	p.ppSinglePassSets = arr
	if err := l.call(C.CX_FN_cuptiProfilerHostGetSinglePassSets, unsafe.Pointer(&p)); err != nil { // fill
		return nil, fmt.Errorf("listing single-pass sets of %s: %w", chip, err)
	}
	return goStrings(arr, min(n, p.numOfSinglePassSets)), nil
}

// MetricsInSinglePassSet is the two-phase cuptiProfilerHostGetMetricsInSinglePassSet: the full
// metric names of one set. The first call (both buffers NULL) reports the count and the bytes
// of the name buffer; the second fills an index array and the buffer, metric i being the C
// string at buf+indices[i].
func (l *Lib) MetricsInSinglePassSet(chip, set string) ([]string, error) {
	what := fmt.Sprintf("listing metrics of single-pass set %q of %s", set, chip)
	if err := l.singlePassSetsError(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	cchip, cset := C.CString(chip), C.CString(set)
	defer C.free(unsafe.Pointer(cchip))
	defer C.free(unsafe.Pointer(cset))
	p := C.CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params{
		structSize: C.CUpti_Profiler_Host_GetMetricsInSinglePassSet_Params_STRUCT_SIZE,
		pChipName:  cchip, pSinglePassSetName: cset}
	if err := l.call(C.CX_FN_cuptiProfilerHostGetMetricsInSinglePassSet, unsafe.Pointer(&p)); err != nil { // sizes
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	n, size := p.numOfMetricsInSinglePassSet, p.metricsBufferSize
	if n == 0 {
		return []string{}, nil
	}
	idx := (*C.size_t)(C.calloc(n, C.size_t(unsafe.Sizeof(C.size_t(0)))))
	defer C.free(unsafe.Pointer(idx))
	buf := (*C.uint8_t)(C.calloc(1, size+1))
	defer C.free(unsafe.Pointer(buf))
	p.pMetricsIndicesBuffer, p.pMetricsBuffer = idx, buf
	if err := l.call(C.CX_FN_cuptiProfilerHostGetMetricsInSinglePassSet, unsafe.Pointer(&p)); err != nil { // fill
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	names := C.GoBytes(unsafe.Pointer(buf), C.int(size))
	offs := unsafe.Slice(idx, int(min(n, p.numOfMetricsInSinglePassSet)))
	out := make([]string, 0, len(offs))
	for i, off := range offs {
		if uint64(off) >= uint64(len(names)) {
			return nil, fmt.Errorf("%s: metric %d at offset %d is outside the %d-byte buffer", what, i, off, len(names))
		}
		s := names[off:]
		if end := bytes.IndexByte(s, 0); end >= 0 {
			s = s[:end]
		}
		out = append(out, string(s))
	}
	return out, nil
}
