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
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// peer is what the kernel says about the other end of a connection: the credentials of the
// process that called connect (SO_PEERCRED, fixed at that moment) and its /proc entry, read
// first thing after the accept. The hello is then checked against it (verify).
type peer struct {
	pid  int32 // in the exporter's PID namespace; 0 when the process is not visible from it
	uid  uint32
	proc procEntry
	err  error // why the process could not be read: it is only claimed
	// pinned: the /proc entry was read while a pidfd taken at connect time (SO_PEERPIDFD)
	// showed the process alive, so it is that process's whatever happened to its PID.
	pinned bool
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

// maxSysStat bounds the read of /proc/stat, whose btime line follows a line per CPU and the
// interrupt counts (tens of KiB on large nodes).
const maxSysStat = 1 << 20

// startTimeSlack is how far a hello's start time may be from the kernel's: both come from
// the boot time in whole seconds, which a clock step between them can move.
const startTimeSlack = 2_000_000_000

// errNotVisible: the kernel names no PID for the peer, which runs in a PID namespace the
// exporter does not see (the exporter runs without the host PID namespace).
var errNotVisible = errors.New("peer process not visible in the exporter's PID namespace")

// errExited: the process that connected was gone before its /proc entry was read (a
// short-lived process whose connection waited in the backlog); its PID may be another's now.
var errExited = errors.New("peer process exited before its connection was accepted")

// creds is what the kernel fixed about the peer when it connected, taken right after the
// accept: its PID and UID (SO_PEERCRED) and, where the kernel has SO_PEERPIDFD (Linux 6.5),
// a pidfd of that very process, which no later process can take over.
type creds struct {
	pid   int32
	uid   uint32
	pidfd int // -1 when none
	err   error
}

// peerPidfd says whether the kernel has SO_PEERPIDFD; it is cleared the first time the
// kernel answers that it does not.
type peerPidfd struct{ off atomic.Bool }

// takeCreds asks the kernel who connected c: SO_PEERCRED, and SO_PEERPIDFD unless pf is off.
func takeCreds(c net.Conn, pf *peerPidfd) creds {
	cr := creds{pidfd: -1}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		cr.err = errors.New("not a Unix connection")
		return cr
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		cr.err = err
		return cr
	}
	var ucred *unix.Ucred
	var credErr, fdErr error
	if err := raw.Control(func(fd uintptr) {
		ucred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if credErr == nil && !pf.off.Load() {
			cr.pidfd, fdErr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		}
	}); err != nil {
		cr.err = err
		return cr
	}
	if credErr != nil {
		cr.err = fmt.Errorf("SO_PEERCRED: %w", credErr)
		return cr
	}
	cr.pid, cr.uid = ucred.Pid, ucred.Uid
	switch {
	case errors.Is(fdErr, unix.ENOPROTOOPT):
		pf.off.Store(true) // Linux before 6.5: read /proc at once instead (the fallback)
		cr.pidfd = -1
	case fdErr != nil:
		// Linux 6.5 to 6.15 give no pidfd of a process that has been reaped.
		cr.pidfd, cr.err = -1, errExited
	}
	return cr
}

// identifier reads the /proc entries of peers.
type identifier struct {
	root  string // where /proc is (WithProcRoot)
	boot  bootTime
	cache procCache
}

// identify reads the /proc entry of the peer of cr and closes cr's pidfd. With a pidfd the
// entry is the connecting process's only if that process is still alive after the read (its
// PID cannot have been reused while it lives): otherwise it is gone, and the peer only
// claimed.
func (id *identifier) identify(cr creds) peer {
	p := peer{pid: cr.pid, uid: cr.uid, err: cr.err}
	if cr.pidfd >= 0 {
		defer unix.Close(cr.pidfd)
	}
	switch {
	case p.err != nil:
		return p
	case p.pid <= 0:
		p.err = errNotVisible
		return p
	}
	if cr.pidfd < 0 {
		p.proc, p.err = readProc(id.root, p.pid, &id.boot)
		return p
	}
	key, keyed := id.cache.key(cr.pidfd)
	if e, ok := id.cache.get(key, p.pid); keyed && ok {
		p.proc, p.pinned = e, true
		return p
	}
	p.proc, p.err = readProc(id.root, p.pid, &id.boot)
	if !alive(cr.pidfd) {
		p.proc, p.err = procEntry{}, errExited // whatever was read may be another process's
		return p
	}
	p.pinned = p.err == nil
	if p.pinned && keyed {
		id.cache.put(key, p.pid, p.proc)
	}
	return p
}

// alive says whether the process of pidfd has not been reaped: its PID is still its own.
// PIDFD_GET_INFO (Linux 6.13) answers ESRCH once it is; before, a pidfd polls readable once its
// process has exited, which is taken as gone (a zombie's PID is still its own, but the process
// is short-lived anyway). Neither needs a permission the exporter may lack (signal 0 would, for
// another user's process without CAP_KILL) nor a syscall a seccomp profile may refuse.
func alive(pidfd int) bool {
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_PID}
	switch err := unix.IoctlPidfdInfo(pidfd, &info); {
	case err == nil:
		return true
	case errors.Is(err, unix.ESRCH):
		return false
	}
	return !exited(pidfd)
}

// exited says whether the process of pidfd has exited: its pidfd polls readable (Linux 5.3).
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0 && fds[0].Revents&unix.POLLIN != 0
}

// procCache keeps the /proc entries of processes identified through a pidfd for a moment,
// by the pidfd's inode, which names one process for the life of the system where pidfds
// live in pidfs (Linux 6.9). A flood of connections from one process then costs a read of
// /proc every procCacheTTL, not one per connection: the backlog drains fast, and a
// short-lived process queued behind the flood is more likely alive when its turn comes.
// Only the cgroup of an entry can change (a process moved to another cgroup), hence the short
// life of an entry.
type procCache struct {
	once  sync.Once
	pidfs bool // pidfds have inodes of their own

	mu      sync.Mutex
	entries map[uint64]cachedProc
}

type cachedProc struct {
	pid int32
	e   procEntry
	at  time.Time
}

const (
	procCacheTTL = 250 * time.Millisecond
	procCacheMax = 4096
)

// pidfsMagic is the file system type of pidfds in pidfs (PIDFS_MAGIC).
const pidfsMagic = 0x50494446

// key is the inode of pidfd, when pidfds have inodes of their own.
func (c *procCache) key(pidfd int) (uint64, bool) {
	c.once.Do(func() {
		var fs unix.Statfs_t
		c.pidfs = unix.Fstatfs(pidfd, &fs) == nil && fs.Type == pidfsMagic
	})
	var st unix.Stat_t
	if !c.pidfs || unix.Fstat(pidfd, &st) != nil {
		return 0, false
	}
	return st.Ino, true
}

func (c *procCache) get(key uint64, pid int32) (procEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || e.pid != pid || time.Since(e.at) > procCacheTTL {
		return procEntry{}, false
	}
	return e.e, true
}

func (c *procCache) put(key uint64, pid int32, e procEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if len(c.entries) >= procCacheMax {
		for k, old := range c.entries {
			if now.Sub(old.at) > procCacheTTL {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= procCacheMax {
			clear(c.entries)
		}
	}
	if c.entries == nil {
		c.entries = make(map[uint64]cachedProc)
	}
	c.entries[key] = cachedProc{pid: pid, e: e, at: now}
}

// peerPidfdSupported says whether this kernel has SO_PEERPIDFD (Linux 6.5).
func peerPidfdSupported() bool {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	fd, err := unix.GetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// bootTime caches /proc/stat's btime (seconds since the epoch) for a second: reading
// /proc/stat costs a line per CPU and per interrupt, and its btime only moves when the clock
// is stepped.
type bootTime struct {
	mu   sync.Mutex
	at   time.Time
	secs uint64
}

func (b *bootTime) get(root string) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.at.IsZero() && time.Since(b.at) < time.Second {
		return b.secs, nil
	}
	stat, err := readLimited(filepath.Join(root, "stat"), maxSysStat)
	if err != nil {
		return 0, err
	}
	secs, err := parseBootTime(stat)
	if err != nil {
		return 0, fmt.Errorf("%s/stat: %w", root, err)
	}
	b.secs, b.at = secs, time.Now()
	return secs, nil
}

// readProc reads the start time, namespace PIDs and cgroup of pid under root (/proc).
func readProc(root string, pid int32, boot *bootTime) (procEntry, error) {
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
	btime, err := boot.get(root)
	if err != nil {
		return e, err
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

func readBounded(path string) ([]byte, error) { return readLimited(path, maxProcFile) }

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
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

// parseBootTime reads the btime line of /proc/stat (seconds since the epoch).
func parseBootTime(stat []byte) (uint64, error) {
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
//
// The start time must be given (0 was once taken as "unknown", which let a process that
// exited have its PID's next owner verified in its place) and agree with the kernel's. Without
// a pidfd (the fallback) the /proc entry may be of a later owner of the PID, so it must
// agree to the tick: both sides compute btime + ticks, and only btime's whole seconds may
// differ (a clock step between the two reads).
func verify(pe peer, p *record.Process) (refused string) {
	if pe.err != nil {
		p.Identity = record.IdentityClaimed
		return ""
	}
	switch own := pe.proc.nspids; {
	case len(own) > 0 && p.PID != own[len(own)-1]:
		return claimPID // getpid() in its own namespace is the last NSpid
	case len(own) == 0 && p.PID != uint32(pe.pid):
		p.Identity = record.IdentityClaimed // a kernel without NSpid: cannot tell its own PID
		return ""
	}
	d := absDiff(p.StartTime, pe.proc.startTime)
	if p.StartTime == 0 || d > startTimeSlack || !pe.pinned && d%1_000_000_000 != 0 {
		return claimStartTime
	}
	p.PID, p.StartTime, p.Cgroup = uint32(pe.pid), pe.proc.startTime, pe.proc.cgroup
	p.Identity = record.IdentityVerified
	return ""
}

func absDiff(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return b - a
}
