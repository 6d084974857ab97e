//go:build linux

package execevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dataPages is each CPU's ring of records (a power of two): 16 KiB holds about 500 exec
// records, what the watcher would have to miss between two reads for one to be lost.
const dataPages = 4

// Source delivers the PIDs of the processes that exec'd on any CPU.
type Source struct {
	ep *os.File // the epoll set of the CPUs' events, read through the Go runtime's poller
	rc syscall.RawConn

	mu     sync.Mutex // Close unmaps the rings, which a Wait in another goroutine reads
	rings  []ring     // nil once closed
	evs    []unix.EpollEvent
	lost   uint64 // records the kernel dropped since Open (a ring was full)
	failed error  // arming a ring failed: Wait reports it
}

// ring is one CPU's event and its mapped ring buffer.
type ring struct {
	fd    int
	mem   []byte                  // the mapping: a header page, then the data pages
	meta  *unix.PerfEventMmapPage // the header page: data_head (the kernel's) and data_tail (ours)
	data  []byte                  // the data pages, a power of two long
	armed bool                    // in the epoll set
}

// Open starts one event on each online CPU. It fails where perf events cannot be opened for
// the whole host (neither CAP_PERFMON nor CAP_SYS_ADMIN with perf_event_paranoid above 0, a
// seccomp filter, a kernel without perf events): the caller then polls.
func Open() (*Source, error) {
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	s := &Source{}
	closeAll := func() {
		s.unmap()
		unix.Close(epfd)
	}
	page := os.Getpagesize()
	for _, cpu := range cpus {
		attr := unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_SOFTWARE,
			Config: unix.PERF_COUNT_SW_DUMMY, // counts nothing: it only carries the side-band records
			// comm with comm_exec: a record at every exec (and rename); a watermark of one
			// byte wakes the reader at each record (wakeup_events counts samples only).
			Bits:   unix.PerfBitComm | unix.PerfBitCommExec | unix.PerfBitWatermark,
			Wakeup: 1,
		}
		attr.Size = uint32(unsafe.Sizeof(attr))
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if errors.Is(err, unix.ENODEV) { // went offline since the list was read
			continue
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("perf_event_open on cpu %d: %w", cpu, err)
		}
		mem, err := unix.Mmap(fd, 0, (1+dataPages)*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			unix.Close(fd)
			closeAll()
			return nil, fmt.Errorf("mapping cpu %d's ring: %w", cpu, err)
		}
		s.rings = append(s.rings, ring{fd: fd, mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0])), data: mem[page:], armed: true})
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, interest(len(s.rings)-1)); err != nil {
			closeAll()
			return nil, fmt.Errorf("epoll_ctl: %w", err)
		}
	}
	if len(s.rings) == 0 {
		closeAll()
		return nil, errors.New("no online cpu")
	}
	// Non-blocking, so that os.NewFile hands the set to the runtime's poller: a Wait that finds
	// nothing parks its goroutine, no thread.
	if err := unix.SetNonblock(epfd, true); err != nil {
		closeAll()
		return nil, err
	}
	s.ep = os.NewFile(uintptr(epfd), "exec-events")
	if s.rc, err = s.ep.SyscallConn(); err != nil {
		s.Close()
		return nil, err
	}
	s.evs = make([]unix.EpollEvent, len(s.rings))
	return s, nil
}

// interest is a ring's entry in the epoll set: readable, the ring's index as data.
func interest(i int) *unix.EpollEvent {
	return &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
}

// Wait blocks until at least one process exec'd or records were lost, and appends the PIDs
// of those that exec'd (in the opener's PID namespace; processes outside it are left out) to
// pids, at most limit in all (more set overflow, as lost records do: the caller then looks at
// every process). It returns an error once Close was called.
//
// Between two Waits no record wakes the process: Wait takes every CPU out of the epoll set
// before it returns, and the next Wait puts them back. Left in it, every record of a host that
// execs all the time woke the runtime's poller thread while the caller paused, and so did an
// entry only disabled (EPOLL_CTL_MOD without events): beside a loop of execs on the build
// machine 451-537 context switches a second against 60 (scripts/cpu/execwake,
// docs/performance.md "The give-way watch woken by execs").
func (s *Source) Wait(pids []int, limit int) (_ []int, overflow bool, _ error) {
	err := s.rc.Read(func(fd uintptr) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.rings == nil {
			return true // closed: reported below
		}
		if err := s.arm(int(fd)); err != nil {
			s.failed = err
			return true
		}
		// Empty the set's ready list, else the runtime's edge-triggered poll never fires again.
		for {
			n, err := epollPoll(int(fd), s.evs)
			if err == unix.EINTR {
				continue
			}
			if n < len(s.evs) {
				break
			}
		}
		for i := range s.rings {
			lost := s.rings[i].drain(func(pid int) {
				if len(pids) < limit {
					pids = append(pids, pid)
				} else {
					overflow = true
				}
			})
			if lost > 0 {
				s.lost += lost
				overflow = true
			}
		}
		if len(pids) > 0 || overflow {
			// Until the next Wait the records wait in the rings: an entry left armed would
			// wake the runtime's poller at each of its CPU's records.
			if err := s.disarm(int(fd)); err != nil {
				s.failed = err
			}
			return true
		}
		return false // nothing for the caller (a rename): wait for the next record
	})
	if err == nil {
		s.mu.Lock()
		switch {
		case s.rings == nil:
			err = os.ErrClosed
		case s.failed != nil:
			err = s.failed
		}
		s.mu.Unlock()
	}
	return pids, overflow, err
}

// arm puts every CPU back in the epoll set epfd; one with a record already waiting is ready at
// once. s.mu is held.
func (s *Source) arm(epfd int) error {
	for i := range s.rings {
		r := &s.rings[i]
		if r.armed {
			continue
		}
		if err := epollCtl(epfd, unix.EPOLL_CTL_ADD, r.fd, interest(i)); err != nil && err != unix.EEXIST {
			return fmt.Errorf("arming cpu ring %d: %w", i, err)
		}
		r.armed = true
	}
	return nil
}

// disarm takes every CPU out of the epoll set epfd (its records still land in its ring). s.mu
// is held.
func (s *Source) disarm(epfd int) error {
	for i := range s.rings {
		r := &s.rings[i]
		if !r.armed {
			continue
		}
		if err := epollCtl(epfd, unix.EPOLL_CTL_DEL, r.fd, interest(i)); err != nil && err != unix.ENOENT {
			return fmt.Errorf("disarming cpu ring %d: %w", i, err)
		}
		r.armed = false
	}
	return nil
}

// Lost is the number of records the kernel dropped because a ring was full.
func (s *Source) Lost() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// CPUs is the number of CPUs watched.
func (s *Source) CPUs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rings)
}

// Close stops the events; a Wait blocked in another goroutine returns an error. It may be
// called more than once.
func (s *Source) Close() error {
	err := s.ep.Close() // unblocks a parked Wait; the set is closed once no Wait uses it
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unmap()
	return err
}

// unmap releases the rings and their events; s.mu is held (or s not yet shared).
func (s *Source) unmap() {
	for _, r := range s.rings {
		unix.Munmap(r.mem)
		unix.Close(r.fd)
	}
	s.rings = nil
}

// drain reads the records the kernel wrote since the last drain, calls execd with the PID of
// each process that exec'd, and returns the number of records lost.
func (r *ring) drain(execd func(pid int)) (lost uint64) {
	head := atomic.LoadUint64(&r.meta.Data_head) // the kernel's; loaded before the records
	tail := r.meta.Data_tail
	if head-tail > uint64(len(r.data)) { // more than the ring holds: never from a working kernel
		atomic.StoreUint64(&r.meta.Data_tail, head)
		return 1 // counted as lost: the caller reads every process
	}
	for head-tail >= 8 {
		typ, misc, size := r.u32(tail), uint16(r.u32(tail+4)), uint64(r.u32(tail+4)>>16)
		if size < 8 || size > head-tail { // never written by a working kernel: drop the rest
			break
		}
		switch typ {
		case unix.PERF_RECORD_COMM: // pid, tid, comm
			if misc&unix.PERF_RECORD_MISC_COMM_EXEC != 0 && size >= 16 {
				// After exec the process is its one thread (the thread group's leader). A
				// PID of 0: a process outside the opener's PID namespace.
				if pid, tid := r.u32(tail+8), r.u32(tail+12); pid != 0 && pid == tid {
					execd(int(pid))
				}
			}
		case unix.PERF_RECORD_LOST: // id, lost
			if size >= 24 {
				lost += uint64(r.u32(tail+16)) | uint64(r.u32(tail+20))<<32
			}
		}
		tail += size
	}
	atomic.StoreUint64(&r.meta.Data_tail, head) // the kernel may write over what was read
	return lost
}

// u32 reads the 32-bit word at offset off of the ring (records wrap at its end).
func (r *ring) u32(off uint64) uint32 {
	mask := uint64(len(r.data) - 1)
	var b [4]byte
	for i := range b {
		b[i] = r.data[(off+uint64(i))&mask]
	}
	return binary.NativeEndian.Uint32(b[:])
}

// onlineCPUs reads /sys/devices/system/cpu/online ("0-15,32-47").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

// parseCPUList parses the kernel's CPU list format; at most maxCPUs CPUs.
func parseCPUList(s string) ([]int, error) {
	const maxCPUs = 1 << 13 // the kernel's NR_CPUS at most
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= maxCPUs {
			return nil, fmt.Errorf("cpu list %q: bad part %q", s, part)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// epollPoll and epollCtl are epoll_pwait without waiting and epoll_ctl, as raw system calls, which the Go scheduler is not told of: a system call made the usual way while every
// goroutine sleeps wakes the runtime's monitor thread, and a look makes several. Neither
// blocks, so a raw call is safe.
func epollPoll(epfd int, evs []unix.EpollEvent) (int, error) {
	n, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&evs[0])), uintptr(len(evs)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func epollCtl(epfd, op, fd int, ev *unix.EpollEvent) error {
	_, _, errno := syscall.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(epfd), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
