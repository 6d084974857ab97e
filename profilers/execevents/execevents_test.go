//go:build linux

package execevents

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// open opens a Source or skips where this host does not allow perf events for the whole host.
func open(t *testing.T) *Source {
	t.Helper()
	s, err := Open()
	if err != nil {
		t.Skipf("no exec events here (the watcher polls): %v", err)
	}
	return s
}

// waitFor waits for pid among the PIDs s reports, for at most 5 s, and returns every PID
// reported until then.
func waitFor(t *testing.T, s *Source, pid int) (seen []int) {
	t.Helper()
	type result struct {
		pids     []int
		overflow bool
		err      error
	}
	deadline := time.After(5 * time.Second)
	for {
		ch := make(chan result, 1)
		go func() {
			pids, overflow, err := s.Wait(nil, 64)
			ch <- result{pids, overflow, err}
		}()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			seen = append(seen, r.pids...)
			if slices.Contains(r.pids, pid) {
				return seen
			}
			if r.overflow {
				t.Logf("records lost or more than 64 execs: %v", r.pids)
			}
		case <-deadline:
			s.Close()
			t.Fatalf("no exec record for pid %d within 5 s", pid)
		}
	}
}

// TestExecIsReported: a process started after Open is reported by its PID, by the kernel's
// record of its exec (the real kernel, no fake).
func TestExecIsReported(t *testing.T) {
	s := open(t)
	defer s.Close()
	if s.CPUs() == 0 {
		t.Fatal("no cpu watched")
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor(t, s, cmd.Process.Pid)
}

// TestRenamesAreNotReported: renaming the process (its first thread, whose TID is its PID)
// writes a COMM record without the exec flag, which is not reported. It is written before the
// process is started, so it is read no later than that process's exec.
func TestRenamesAreNotReported(t *testing.T) {
	s := open(t)
	defer s.Close()
	name, _ := os.ReadFile("/proc/self/comm")
	if err := os.WriteFile("/proc/self/comm", []byte("renamedthread"), 0); err != nil {
		t.Skip(err)
	}
	defer os.WriteFile("/proc/self/comm", name, 0)
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if seen := waitFor(t, s, cmd.Process.Pid); slices.Contains(seen, os.Getpid()) {
		t.Errorf("this process's rename was reported as an exec: %v", seen)
	}
}

// TestCloseEndsAWait: Close unblocks a Wait parked in another goroutine.
func TestCloseEndsAWait(t *testing.T) {
	s := open(t)
	done := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, _, err = s.Wait(nil, 64)
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Wait after Close: no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait still blocked 5 s after Close")
	}
}

func TestParseCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{{"0", []int{0}}, {"0-3", []int{0, 1, 2, 3}}, {"0-1,4,6-7", []int{0, 1, 4, 6, 7}}} {
		got, err := parseCPUList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "0-99999999", "1,,2"} {
		if got, err := parseCPUList(bad); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", bad, got)
		}
	}
}

// TestNoWakeBetweenWaits: once Wait has returned, no CPU is in the epoll set (a host that execs
// all the time would otherwise wake the runtime's poller at each record while the caller
// pauses), and the records written meanwhile are in the rings for the next Wait.
func TestNoWakeBetweenWaits(t *testing.T) {
	s := open(t)
	defer s.Close()
	start := func() int {
		cmd := exec.Command("sleep", "5")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	waitFor(t, s, start())
	second := start()
	time.Sleep(50 * time.Millisecond) // its exec record is written by now
	// A CPU in the set would take a modification; one out of it answers ENOENT.
	in := 0
	if err := s.rc.Control(func(fd uintptr) {
		for i, r := range s.rings {
			if epollCtl(int(fd), unix.EPOLL_CTL_MOD, r.fd, interest(i)) != unix.ENOENT {
				in++
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if in != 0 {
		t.Errorf("%d of %d CPUs in the epoll set between two Waits, want none", in, s.CPUs())
	}
	waitFor(t, s, second)
}
