package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A real /proc/PID/stat line (fields 3..52) with the start time as field 22 and the exit
// signal as field 38 (17, SIGCHLD, for a process; -1 for a thread other than the first).
func statLine(comm string, start string) string { return statLineExit(comm, start, "17") }

func statLineExit(comm, start, exitSignal string) string {
	return "4242 (" + comm + ") S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 " + start +
		" 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 " + exitSignal + " 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
}

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line string
		want Stat
		ok   bool
	}{
		{statLine("ncu", "12345"), Stat{Comm: "ncu", Start: 12345}, true},
		{statLine("a) (b", "7"), Stat{Comm: "a) (b", Start: 7}, true}, // a name may hold parentheses and spaces
		{statLine("", "9"), Stat{Start: 9}, true},
		{statLineExit("pt_main_thread", "9", "-1"), Stat{Comm: "pt_main_thread", Start: 9, Thread: true}, true},
		{statLineExit("ncu", "9", "0"), Stat{Comm: "ncu", Start: 9}, true},            // cloned without an exit signal: a process
		{"1 (x) " + strings.Repeat("9 ", 19) + "5", Stat{Comm: "x", Start: 5}, true},  // ends at the start time: no exit signal, a process
		{"4242 (ncu) S 1 2 3", Stat{}, false},                                         // cut short
		{"4242 ncu S 1", Stat{}, false},                                               // no name
		{statLine("ncu", "x"), Stat{}, false},                                         // not a number
		{"1 (x) " + strings.Repeat("9 ", 19) + "18446744073709551616", Stat{}, false}, // overflows uint64
	} {
		got, ok := ParseStat([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("ParseStat(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParseStat: any input, no panic, linear time, and a parsed name lies inside the input.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte(statLine("ncu", "12345")))
	f.Add([]byte(statLine("a) (b", "7")))
	f.Add([]byte("((((((((((((((((("))
	f.Fuzz(func(t *testing.T, b []byte) {
		t0 := time.Now()
		st, ok := ParseStat(b)
		comm := st.Comm
		if d := time.Since(t0); d > 50*time.Millisecond+time.Duration(len(b))*time.Microsecond {
			t.Fatalf("ParseStat took %v for %d bytes", d, len(b))
		}
		if ok && !strings.Contains(string(b), "("+comm+")") {
			t.Fatalf("name %q not in the input", comm)
		}
	})
}

func TestFSReadsBounded(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "17"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "17", "stat"), []byte(statLine("nsys", "99")), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "17", "cmdline"), []byte(strings.Repeat("x", 10000)+"\x00"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "self"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "loadavg"), []byte("0.10 0.20 0.30 2/345 6789\n"), 0o644))
	fs := FS{Root: root}
	if st, ok := fs.Stat(17); st != (Stat{Comm: "nsys", Start: 99}) || !ok {
		t.Fatalf("Stat = %+v %v", st, ok)
	}
	if _, ok := fs.Stat(18); ok {
		t.Fatal("Stat of a missing process succeeded")
	}
	b, err := fs.Read("17/cmdline", MaxCmdline)
	if err != nil || len(b) != MaxCmdline {
		t.Fatalf("Read = %d bytes, %v; want the bound %d", len(b), err, MaxCmdline)
	}
	if got := fs.LastPID(); got != 6789 {
		t.Fatalf("LastPID = %d", got)
	}
	// The file stays open and is read again from its start: a new content shows.
	must(t, os.WriteFile(filepath.Join(root, "loadavg"), []byte("0.10 0.20 0.30 2/345 6790\n"), 0o644))
	if got := fs.LastPID(); got != 6790 {
		t.Fatalf("LastPID after a change = %d", got)
	}
	must(t, os.WriteFile(filepath.Join(root, "loadavg"), []byte("garbage\n"), 0o644))
	if got := fs.LastPID(); got != 0 {
		t.Fatalf("LastPID of a malformed loadavg = %d, want 0", got)
	}
	fs.Close()
	pids, err := fs.PIDs()
	if err != nil || !slices.Equal(pids, []int{17}) {
		t.Fatalf("PIDs = %v, %v; want [17] (not self, not loadavg)", pids, err)
	}
	// Lines: line by line, a too long line in pieces, stopped by fn or by the bound.
	long := strings.Repeat("y", 10000)
	must(t, os.WriteFile(filepath.Join(root, "17", "maps"), []byte("a\n"+long+"\nb /lib/x.so\nc\n"), 0o644))
	var lines []int
	must(t, fs.Lines("17/maps", MaxMaps, func(l []byte) bool { lines = append(lines, len(l)); return true }))
	if want := []int{1, smallRead, smallRead, 10000 - 2*smallRead, 11, 1}; !slices.Equal(lines, want) {
		t.Fatalf("line lengths %v, want %v", lines, want)
	}
	n := 0
	must(t, fs.Lines("17/maps", MaxMaps, func([]byte) bool { n++; return n < 2 }))
	if n != 2 {
		t.Fatalf("Lines went on after fn said stop (%d lines)", n)
	}
	n = 0
	must(t, fs.Lines("17/maps", 5, func([]byte) bool { n++; return true }))
	if n != 2 { // "a\n" and the first 3 bytes of the long line
		t.Fatalf("%d lines within a 5-byte bound, want 2", n)
	}
	if got := SplitNUL([]byte("a\x00b=c\x00\x00")); !slices.Equal(got, []string{"a", "b=c"}) {
		t.Fatalf("SplitNUL = %q", got)
	}
}

// TestStatTellsThreadsOnTheRealProc: this test process's threads, read as /proc/TID (as the
// watcher reads a PID the counter passed), are threads; the process itself is not.
func TestStatTellsThreadsOnTheRealProc(t *testing.T) {
	fs := FS{Root: "/proc"}
	pid := os.Getpid()
	tids, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		t.Skip("no /proc here:", err)
	}
	threads := 0
	for _, e := range tids {
		tid, _ := strconv.Atoi(e.Name())
		st, ok := fs.Stat(tid)
		if !ok {
			continue // ended meanwhile
		}
		if st.Thread != (tid != pid) {
			t.Errorf("/proc/%d/stat (process %d): Thread = %v", tid, pid, st.Thread)
		}
		if st.Thread {
			threads++
		}
	}
	if threads == 0 {
		t.Fatalf("none of %d tasks of a Go test process read as a thread", len(tids))
	}
}

// TestLastPIDFollowsTheRealCounter: the newest PID read through the file kept open (a raw
// pread at offset 0 each time) moves when a process starts: the kernel formats the line again
// at each read, not only at open.
func TestLastPIDFollowsTheRealCounter(t *testing.T) {
	fs := FS{Root: "/proc"}
	defer fs.Close()
	before := fs.LastPID()
	if before == 0 {
		t.Skip("no /proc/loadavg PID counter here")
	}
	cmd := exec.Command("true")
	must(t, cmd.Run())
	after := fs.LastPID()
	if after == before {
		t.Fatalf("LastPID stayed %d after process %d started", before, cmd.ProcessState.Pid())
	}
	if cmd.ProcessState.Pid() > before && (after < cmd.ProcessState.Pid()) {
		t.Fatalf("LastPID %d after process %d started (before: %d)", after, cmd.ProcessState.Pid(), before)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
