// Package procfs reads the few /proc files the profiler watcher needs, each to a bound.
package procfs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// smallRead is the largest read that reuses the FS's buffer.
const smallRead = 4 << 10

// FS reads a /proc tree (the host's with hostPID; a fake one in tests). It is not safe for
// concurrent use: it reuses one buffer.
type FS struct {
	Root    string
	buf     []byte
	loadavg *os.File // kept open: LastPID runs every poll, and a pread regenerates the file
}

// Read reads at most limit bytes of Root/rel. A small read's result aliases the FS's buffer
// and is valid until the next Read.
func (fs *FS) Read(rel string, limit int) ([]byte, error) {
	f, err := os.Open(filepath.Join(fs.Root, rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b []byte
	if limit <= smallRead {
		if fs.buf == nil {
			fs.buf = make([]byte, smallRead)
		}
		b = fs.buf[:limit]
	} else {
		b = make([]byte, limit)
	}
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

// Stat reads a process's name and start time (clock ticks after boot) from /proc/PID/stat.
func (fs *FS) Stat(pid int) (comm string, start uint64, ok bool) {
	b, err := fs.Read(strconv.Itoa(pid)+"/stat", MaxStat)
	if err != nil {
		return "", 0, false
	}
	return ParseStat(b)
}

// ParseStat takes the name between the first '(' and the last ')' (a name may hold either)
// and the 22nd field, the start time.
func ParseStat(b []byte) (comm string, start uint64, ok bool) {
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	// the fields after the name: state (3), ppid (4), ... starttime (22)
	rest := b[end+1:]
	for i := 0; i < 19; i++ {
		rest = bytes.TrimLeft(rest, " ")
		sp := bytes.IndexByte(rest, ' ')
		if sp < 0 {
			return "", 0, false
		}
		rest = rest[sp:]
	}
	rest = bytes.TrimLeft(rest, " ")
	if sp := bytes.IndexAny(rest, " \n"); sp >= 0 {
		rest = rest[:sp]
	}
	start, err := strconv.ParseUint(string(rest), 10, 64)
	if err != nil {
		return "", 0, false
	}
	return string(b[open+1 : end]), start, true
}

// LastPID reads the newest PID the kernel handed out: the last field of /proc/loadavg
// ("" when it cannot be read).
func (fs *FS) LastPID() string {
	if fs.loadavg == nil {
		f, err := os.Open(filepath.Join(fs.Root, "loadavg"))
		if err != nil {
			return ""
		}
		fs.loadavg = f
	}
	var buf [128]byte
	n, err := fs.loadavg.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		fs.Close() // opened again next time
		return ""
	}
	b := bytes.TrimSpace(buf[:n])
	return string(b[bytes.LastIndexByte(b, ' ')+1:])
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
