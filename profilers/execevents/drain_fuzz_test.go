//go:build linux

package execevents

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzDrain: whatever a ring holds and wherever the kernel's head and our tail stand, drain
// ends after at most one pass over the ring (a head further ahead than the ring holds counts as
// lost), hands out only positive PIDs, at most one a record of 8 bytes or more, and leaves the
// tail at the head.
func FuzzDrain(f *testing.F) {
	rec := func(typ uint32, misc, size uint16, words ...uint32) []byte {
		b := binary.NativeEndian.AppendUint32(nil, typ)
		b = binary.NativeEndian.AppendUint16(b, misc)
		b = binary.NativeEndian.AppendUint16(b, size)
		for _, w := range words {
			b = binary.NativeEndian.AppendUint32(b, w)
		}
		return b
	}
	execRec := rec(unix.PERF_RECORD_COMM, unix.PERF_RECORD_MISC_COMM_EXEC, 24, 42, 42, 0x65757274, 0) // "true"
	f.Add(execRec, uint64(0), uint64(24))
	f.Add(append(rec(unix.PERF_RECORD_LOST, 0, 24, 1, 0, 7, 0), execRec...), uint64(4090), uint64(48)) // wraps
	f.Add(rec(unix.PERF_RECORD_COMM, 0, 0), uint64(8), uint64(1<<20))                                  // size 0
	f.Fuzz(func(t *testing.T, data []byte, tail, n uint64) {
		r := ring{data: make([]byte, 4096), meta: &unix.PerfEventMmapPage{}}
		for i := range r.data {
			if len(data) > 0 {
				r.data[i] = data[(uint64(i)+tail)%uint64(len(data))]
			}
		}
		r.meta.Data_tail, r.meta.Data_head = tail, tail+n
		var pids []int
		lost := r.drain(func(pid int) { pids = append(pids, pid) })
		if r.meta.Data_tail != r.meta.Data_head {
			t.Fatalf("tail %d after drain, head %d", r.meta.Data_tail, r.meta.Data_head)
		}
		if len(pids) > len(r.data)/8 || (n > uint64(len(r.data)) && (len(pids) > 0 || lost == 0)) {
			t.Fatalf("%d PIDs (lost %d) from %d bytes of records in a ring of %d", len(pids), lost, n, len(r.data))
		}
		for _, p := range pids {
			if p <= 0 {
				t.Fatalf("PID %d handed out", p)
			}
		}
	})
}
