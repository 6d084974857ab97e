package receiver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cupti-exporter/cupti-exporter/activity"
)

// peer is what the kernel says about the other end of a connection, read when it is
// accepted: the credentials of the process that connected (SO_PEERCRED, fixed at connect
// time) and its /proc entry. The hello is then checked against it (verify).
type peer struct {
	pid  int32 // in the exporter's PID namespace; 0 when the process is not visible from it
	uid  uint32
	proc procEntry
	err  error // why the process could not be read: it is only claimed
}

// procEntry is what /proc says about a process.
type procEntry struct {
	startTime uint64   // ns since the Unix epoch, computed as the injection library does
	nspids    []uint32 // NSpid of /proc/<pid>/status: its PID in each namespace, the exporter's first
	cgroup    string   // /proc/<pid>/cgroup
}

// userHZ is the unit of /proc/<pid>/stat's start time. Linux reports it in USER_HZ, 100 on
// every architecture Go supports (prometheus/procfs assumes the same).
const userHZ = 100

// maxProcFile bounds what is read of a /proc file: a cgroup file is a few hundred bytes, a
// status file about 1.5 KiB.
const maxProcFile = 16 << 10

// startTimeSlack is how far a hello's start time may be from the kernel's: both come from
// the boot time in whole seconds, which a clock step between them can move.
const startTimeSlack = 2_000_000_000

// errNotVisible: the kernel names no PID for the peer, which runs in a PID namespace the
// exporter does not see (the exporter runs without the host PID namespace).
var errNotVisible = errors.New("peer process not visible in the exporter's PID namespace")

// readPeer asks the kernel who is at the other end of c and reads its /proc entry under root.
func readPeer(c net.Conn, root string) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{err: errors.New("not a Unix connection")}
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return peer{err: err}
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{err: err}
	}
	if credErr != nil {
		return peer{err: fmt.Errorf("SO_PEERCRED: %w", credErr)}
	}
	p := peer{pid: cred.Pid, uid: cred.Uid}
	if p.pid <= 0 {
		p.err = errNotVisible
		return p
	}
	p.proc, p.err = readProc(root, p.pid)
	return p
}

// readProc reads the start time, namespace PIDs and cgroup of pid under root (/proc).
func readProc(root string, pid int32) (procEntry, error) {
	dir := filepath.Join(root, strconv.Itoa(int(pid)))
	var e procEntry
	stat, err := readBounded(filepath.Join(dir, "stat"))
	if err != nil {
		return e, err
	}
	ticks, err := statStartTicks(stat)
	if err != nil {
		return e, fmt.Errorf("%s/stat: %w", dir, err)
	}
	sys, err := readBounded(filepath.Join(root, "stat"))
	if err != nil {
		return e, err
	}
	btime, err := bootTime(sys)
	if err != nil {
		return e, fmt.Errorf("%s/stat: %w", root, err)
	}
	e.startTime = btime*1_000_000_000 + ticks*(1_000_000_000/userHZ)
	status, err := readBounded(filepath.Join(dir, "status"))
	if err != nil {
		return e, err
	}
	e.nspids = nsPIDs(status)
	cg, err := readBounded(filepath.Join(dir, "cgroup"))
	if err != nil {
		return e, err
	}
	e.cgroup = strings.TrimRight(string(cg), "\n")
	return e, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxProcFile))
}

// statStartTicks reads field 22 (starttime) of /proc/<pid>/stat; the command name (field 2,
// in parentheses) may hold spaces and parentheses, so fields are counted after the last ')'.
func statStartTicks(stat []byte) (uint64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	const starttime = 22 - 3 // fields after the name start at 3 (state)
	if len(fields) <= starttime {
		return 0, errors.New("too few fields")
	}
	return strconv.ParseUint(fields[starttime], 10, 64)
}

// bootTime reads the btime line of /proc/stat (seconds since the epoch).
func bootTime(stat []byte) (uint64, error) {
	for line := range bytes.SplitSeq(stat, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, errors.New("no btime")
}

// nsPIDs reads the NSpid line of /proc/<pid>/status (Linux 4.1 and later): the process's PID
// in each PID namespace it belongs to, from the one of this /proc down to its own.
func nsPIDs(status []byte) []uint32 {
	for line := range bytes.SplitSeq(status, []byte("\n")) {
		v, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		var out []uint32
		for _, f := range strings.Fields(string(v)) {
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil {
				return nil
			}
			out = append(out, uint32(n))
		}
		return out
	}
	return nil
}

// A hello's claim the kernel contradicts (cupti_activity_refused_claims_total{claim}).
const (
	claimPID       = "pid"
	claimStartTime = "start_time"
)

// verify checks hello p against what the kernel said of its connection and marks p
// verified (taking PID, StartTime and Cgroup from the kernel) or claimed (the kernel could
// not name the process). It returns the claim the kernel contradicts, if any: the
// connection is then refused (a correct injection library never lies about itself).
func verify(pe peer, p *activity.Process) (refused string) {
	if pe.err != nil {
		p.Identity = activity.IdentityClaimed
		return ""
	}
	switch own := pe.proc.nspids; {
	case len(own) > 0 && p.PID != own[len(own)-1]:
		return claimPID // getpid() in its own namespace is the last NSpid
	case len(own) == 0 && p.PID != uint32(pe.pid):
		p.Identity = activity.IdentityClaimed // a kernel without NSpid: cannot tell its own PID
		return ""
	}
	if p.StartTime != 0 && absDiff(p.StartTime, pe.proc.startTime) > startTimeSlack {
		return claimStartTime
	}
	p.PID, p.StartTime, p.Cgroup = uint32(pe.pid), pe.proc.startTime, pe.proc.cgroup
	p.Identity = activity.IdentityVerified
	return ""
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
