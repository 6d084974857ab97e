// Package procfs reads the few /proc files the profiler watcher needs, each to a bound.
package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// Bounds on what is read of one process's files: a longer command line, environment or
// mapping list is read to the bound (a rule can then miss the rest, never more work).
const (
	MaxStat    = 1 << 10
	MaxStatus  = 4 << 10 // the fields read (PPid) are in its first lines
	MaxCmdline = 4 << 10
	MaxEnviron = 128 << 10
	MaxMaps    = 4 << 20
)

// smallRead is the least buffer Read keeps, and the longest line Lines hands out whole.
const smallRead = 4 << 10

// FS reads a /proc tree (the host's with hostPID; a fake one in tests). It is not safe for
// concurrent use: it reuses one buffer.
type FS struct {
	Root      string
	buf       []byte
	loadavg   *os.File // kept open: LastPID runs every poll, and a pread regenerates the file
	loadavgFD uintptr
}

// Read reads at most limit bytes of Root/rel. The result aliases the FS's buffer and is valid
// until the next Read; the buffer grows to the largest limit asked (an environment, 128 KiB,
// is read for every new process: a new buffer each time cost the collector that much).
func (fs *FS) Read(rel string, limit int) ([]byte, error) {
	f, err := os.Open(filepath.Join(fs.Root, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if len(fs.buf) < limit {
		fs.buf = make([]byte, max(limit, smallRead))
	}
	b := fs.buf[:limit]
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// Lines calls fn with each line of Root/rel (without its newline) until fn returns false, the
// file ends or limit bytes were read; lines longer than 4 KiB are cut. It reads in chunks, so a
// large file (a process's maps) costs no buffer of its size.
func (fs *FS) Lines(rel string, limit int, fn func(line []byte) bool) error {
	f, err := os.Open(filepath.Join(fs.Root, rel))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, int64(limit)))
	sc.Buffer(make([]byte, 0, smallRead), smallRead)
	sc.Split(cutLines)
	for sc.Scan() {
		if !fn(sc.Bytes()) {
			return nil
		}
	}
	return sc.Err()
}

// cutLines is bufio.ScanLines that hands out a too long line in pieces rather than failing.
func cutLines(data []byte, atEOF bool) (int, []byte, error) {
	adv, tok, err := bufio.ScanLines(data, atEOF)
	if adv == 0 && tok == nil && err == nil && len(data) >= smallRead {
		return len(data), data, nil
	}
	return adv, tok, err
}

// Stat is what the watcher reads of /proc/PID/stat.
type Stat struct {
	Comm  string // the name (at most 15 bytes)
	Start uint64 // clock ticks after boot (field 22): with the PID, the process's identity
	// Thread: a thread other than its process's first. /proc/TID answers for every thread,
	// though a listing shows only processes; a thread's exit signal (field 38) is -1.
	Thread bool
}

// Stat reads /proc/PID/stat.
func (fs *FS) Stat(pid int) (Stat, bool) {
	b, err := fs.Read(strconv.Itoa(pid)+"/stat", MaxStat)
	if err != nil {
		return Stat{}, false
	}
	return ParseStat(b)
}

// ParseStat takes the name between the first '(' and the last ')' (a name may hold either),
// the 22nd field, the start time, and the 38th, the exit signal, where the line has it.
func ParseStat(b []byte) (Stat, bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, false
	}
	// the fields after the name: state (3), ppid (4), ... starttime (22), ... exit_signal (38)
	fields := bytes.Fields(b[end+1:])
	const startAt, exitSignalAt = 22 - 3, 38 - 3
	if len(fields) <= startAt {
		return Stat{}, false
	}
	start, err := strconv.ParseUint(string(fields[startAt]), 10, 64)
	if err != nil {
		return Stat{}, false
	}
	st := Stat{Comm: string(b[open+1 : end]), Start: start}
	st.Thread = len(fields) > exitSignalAt && string(fields[exitSignalAt]) == "-1"
	return st, true
}

// LastPID reads the newest PID the kernel handed out (to a process or a thread) in the PID
// namespace of the reader: the last field of /proc/loadavg (0 when it cannot be read).
func (fs *FS) LastPID() int {
	if fs.loadavg == nil {
		f, err := os.Open(filepath.Join(fs.Root, "loadavg"))
		if err != nil {
			return 0
		}
		fs.loadavg, fs.loadavgFD = f, f.Fd() // Fd once: it may make a system call itself
	}
	var buf [128]byte
	n, err := rawPread(fs.loadavgFD, buf[:])
	runtime.KeepAlive(fs.loadavg)
	if err != nil {
		fs.Close() // opened again next time
		return 0
	}
	b := bytes.TrimSpace(buf[:n])
	pid, err := strconv.Atoi(string(b[bytes.LastIndexByte(b, ' ')+1:]))
	if err != nil || pid < 0 {
		return 0
	}
	return pid
}

// rawPread reads the file fd from its start without telling the Go scheduler of a system call.
// LastPID runs at every poll, ten times a second, mostly while the exporter sleeps, and a system
// call made the usual way also wakes the runtime's monitor thread (sysmon) from its deep sleep
// into 20 µs polls. A raw call does not, and is safe here: reading /proc/loadavg formats a line
// in the kernel and never blocks. Measured (docs/performance.md, "The give-way watch's
// wake-ups"): 0.9 ms of CPU a second less at the defaults on the 2-core build machine; no change
// measurable on an H200 host, where the poll's timer itself wakes the monitor.
func rawPread(fd uintptr, buf []byte) (int, error) {
	n, _, errno := syscall.RawSyscall6(syscall.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// Close closes the file LastPID keeps open.
func (fs *FS) Close() {
	if fs.loadavg != nil {
		fs.loadavg.Close()
		fs.loadavg = nil
	}
}

// PIDs lists the processes (the numeric entries) of the tree.
func (fs *FS) PIDs() ([]int, error) {
	d, err := os.Open(fs.Root)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		if n == "" || n[0] < '1' || n[0] > '9' {
			continue
		}
		if pid, err := strconv.Atoi(n); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// SplitNUL splits a NUL-separated file (cmdline, environ); an empty one gives an empty slice.
func SplitNUL(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return []string{}
	}
	return strings.Split(string(b), "\x00")
}
