//go:build cgo

package cupti

/*
#include <stdlib.h>
#include "decoder.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// A Decoder runs a session's decodes on a thread of its own (decoder.c): the decode, each
// completed sample's times and evaluation, and the image's re-initialisation, in one batch,
// while the calling goroutine waits in Go's netpoller. A goroutine in a cgo call keeps the Go
// runtime's monitor polling every 20 µs to 10 ms for as long as the call lasts (a decode's run
// of calls is tens of milliseconds); it cost 2.9-4.0 µs of CPU a sample at 1 ms on an H100 and
// an H200 (docs/performance.md). The thread calls CUPTI one batch at a time, never beside the
// session's owner, which waits for it: the calls stay one at a time, as the package requires.
type Decoder struct {
	l       *Lib
	d       *C.cx_decoder
	b       *C.cx_batch
	done    *os.File
	rc      syscall.RawConn
	cap     int // samples the arrays hold
	metrics int // values a sample
	closed  bool
}

// NewDecoder starts a decoding thread for s's batches.
func (s *Session) NewDecoder() (*Decoder, error) {
	if err := s.usable(); err != nil {
		return nil, err
	}
	d := &Decoder{l: s.l, d: (*C.cx_decoder)(C.calloc(1, C.sizeof_cx_decoder)), b: (*C.cx_batch)(C.calloc(1, C.sizeof_cx_batch))}
	if d.d == nil || d.b == nil {
		C.free(unsafe.Pointer(d.d))
		C.free(unsafe.Pointer(d.b))
		return nil, fmt.Errorf("decoder: %w", ErrOutOfMemory)
	}
	if e := C.cx_decoder_start(d.d); e != 0 {
		C.free(unsafe.Pointer(d.d))
		C.free(unsafe.Pointer(d.b))
		return nil, fmt.Errorf("decoder thread: %w", syscall.Errno(e))
	}
	d.d.job = d.b
	d.done = os.NewFile(uintptr(d.d.done_fd), "cupti-decoder-done")
	rc, err := d.done.SyscallConn()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("decoder: %w", err)
	}
	d.rc = rc
	return d, nil
}

// Batch is what one Decoder.Run did. Its samples' values live in the decoder's C memory until
// the next Run or Close.
type Batch struct {
	Decode     DecodeResult
	DecodeErr  error // cuptiPmSamplingDecodeData's; nothing after it ran
	Info       CounterDataInfo
	InfoErr    error // cuptiPmSamplingGetCounterDataInfo's; no sample was read
	Reset      bool  // the image was re-initialised (not after a decode that stopped full)
	ResetErr   error
	DecodeTime time.Duration // the calls' times, as each call's timer on the calling thread would read
	SampleInfo time.Duration
	Evaluate   time.Duration
	ResetTime  time.Duration
	Samples    int // the completed samples read (at most the image's capacity)
	d          *Decoder
}

// Sample is completed sample i of a Batch: its times (timesErr: they could not be read), and
// its values, nil where it was skipped or its evaluation failed (evalErr).
func (b *Batch) Sample(i int) (start, end uint64, values []float64, timesErr, evalErr error) {
	d := b.d
	if r := unsafe.Slice(d.b.info_r, d.cap)[i]; r != 0 {
		return 0, 0, nil, d.l.result(C.CX_FN_cuptiPmSamplingCounterDataGetSampleInfo, r), nil
	}
	start, end = uint64(unsafe.Slice(d.b.start, d.cap)[i]), uint64(unsafe.Slice(d.b.end, d.cap)[i])
	if i == 0 && d.b.skip_first != 0 {
		return start, end, nil, nil, nil
	}
	if r := unsafe.Slice(d.b.eval_r, d.cap)[i]; r != 0 {
		return start, end, nil, nil, d.l.result(C.CX_FN_cuptiProfilerHostEvaluateToGpuValues, r)
	}
	vals := unsafe.Slice((*float64)(unsafe.Pointer(d.b.values)), d.cap*d.metrics)
	return start, end, vals[i*d.metrics : (i+1)*d.metrics : (i+1)*d.metrics], nil, nil
}

// Run decodes s's hardware buffer into cd, reads and evaluates with h each completed sample
// (from the second on where skipFirst: the rest of a sample the previous re-initialisation
// split), and re-initialises cd unless the decode stopped full, on the decoder's thread. The
// error is the decoder's own (closed, a handle freed); CUPTI's are in the Batch.
func (d *Decoder) Run(s *Session, cd *CounterData, h *Host, skipFirst bool) (*Batch, error) {
	if d == nil || d.closed {
		return nil, ErrClosed
	}
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := cd.usable(); err != nil {
		return nil, err
	}
	if err := h.usable(); err != nil {
		return nil, err
	}
	if err := d.fit(cd.capacity, len(cd.metrics)); err != nil {
		return nil, err
	}
	b := d.b
	b.l, b.obj, b.host = s.l.c, s.c.obj, h.c.obj
	b.img, b.size, b.names, b.nmetrics = cd.c.img, cd.c.size, cd.c.names, C.size_t(len(cd.metrics))
	b.skip_first = 0
	if skipFirst {
		b.skip_first = 1
	}
	if err := d.post(); err != nil {
		return nil, err
	}
	out := &Batch{d: d,
		Decode:     DecodeResult{StopReason: DecodeStopReason(b.stop_reason), Overflow: b.overflow != 0},
		DecodeErr:  s.l.result(C.CX_FN_cuptiPmSamplingDecodeData, b.decode_r),
		InfoErr:    s.l.result(C.CX_FN_cuptiPmSamplingGetCounterDataInfo, b.counter_info_r),
		Info:       CounterDataInfo{Total: int(b.total), Populated: int(b.populated), Completed: int(b.completed)},
		Reset:      b.reset_done != 0,
		ResetErr:   s.l.result(C.CX_FN_cuptiPmSamplingCounterDataImageInitialize, b.reset_r),
		DecodeTime: time.Duration(b.ns_decode), SampleInfo: time.Duration(b.ns_sample_info),
		Evaluate: time.Duration(b.ns_evaluate), ResetTime: time.Duration(b.ns_reset),
		Samples: int(b.n)}
	if out.DecodeErr != nil {
		out.DecodeErr = fmt.Errorf("device %d: %w", s.dev, out.DecodeErr)
	}
	runtime.KeepAlive(cd)
	runtime.KeepAlive(h)
	runtime.KeepAlive(s)
	return out, nil
}

// fit sizes the batch's arrays for an image of capacity samples and metrics values a sample.
func (d *Decoder) fit(capacity, metrics int) error {
	if capacity <= d.cap && metrics <= d.metrics {
		d.metrics = metrics
		return nil
	}
	d.freeArrays()
	b := d.b
	n := C.size_t(capacity)
	b.start = (*C.uint64_t)(C.calloc(n, 8))
	b.end = (*C.uint64_t)(C.calloc(n, 8))
	b.values = (*C.double)(C.calloc(n*C.size_t(metrics), 8))
	b.info_r = (*C.CUptiResult)(C.calloc(n, C.sizeof_CUptiResult))
	b.eval_r = (*C.CUptiResult)(C.calloc(n, C.sizeof_CUptiResult))
	if b.start == nil || b.end == nil || b.values == nil || b.info_r == nil || b.eval_r == nil {
		d.freeArrays()
		return fmt.Errorf("decoder: arrays for %d samples of %d metrics: %w", capacity, metrics, ErrOutOfMemory)
	}
	d.cap, d.metrics = capacity, metrics
	b.cap = n
	return nil
}

func (d *Decoder) freeArrays() {
	b := d.b
	for _, p := range []unsafe.Pointer{unsafe.Pointer(b.start), unsafe.Pointer(b.end), unsafe.Pointer(b.values),
		unsafe.Pointer(b.info_r), unsafe.Pointer(b.eval_r)} {
		C.free(p)
	}
	b.start, b.end, b.values, b.info_r, b.eval_r, b.cap = nil, nil, nil, nil, nil, 0
	d.cap, d.metrics = 0, 0
}

// post hands the batch to the thread and waits until it is done: the write and the reads are
// raw system calls and the wait is the netpoller's, so no P is held in a system call meanwhile.
func (d *Decoder) post() error {
	one := uint64(1)
	if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(d.d.go_fd), uintptr(unsafe.Pointer(&one)), 8); e != 0 {
		return fmt.Errorf("decoder: posting a batch: %w", e)
	}
	var v uint64
	var rerr error
	err := d.rc.Read(func(fd uintptr) bool {
		for {
			_, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&v)), 8)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // not done yet: wait for the eventfd to be readable
			case 0:
				return true
			}
			rerr = e
			return true
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("decoder: waiting for a batch: %w", err)
	}
	return nil
}

// CPU is the CPU time the decoding thread has used (0 when unknown or closed).
func (d *Decoder) CPU() time.Duration {
	if d == nil || d.closed {
		return 0
	}
	return time.Duration(max(int64(C.cx_decoder_cpu_ns(d.d)), 0))
}

// Close ends the thread and frees its memory. Idempotent; not concurrent with Run.
func (d *Decoder) Close() {
	if d == nil || d.closed {
		return
	}
	d.closed = true
	C.cx_decoder_stop(d.d)
	if d.done != nil {
		d.done.Close()
	} else {
		syscall.Close(int(d.d.done_fd))
	}
	d.freeArrays()
	C.free(unsafe.Pointer(d.d))
	C.free(unsafe.Pointer(d.b))
}
