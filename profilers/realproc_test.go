package profilers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestWatcherFindsARealProcess runs the watcher on this host's /proc: a process started after
// its first look is found from the kernel's PID counter (read one by one, or in a listing
// when the host handed out more than probeMax PIDs meanwhile), and its end gives the GPUs back.
func TestWatcherFindsARealProcess(t *testing.T) {
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		t.Skip("no /proc here")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	// The kernel names a process after the base name of the path it was started by.
	name := "cuptiwatchtest"
	link := filepath.Join(t.TempDir(), name)
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	r := twoGPUs()
	w := New(nil, WithNames(name))
	w.Drive(r)
	if w.lastPID == 0 {
		t.Fatal("the PID counter of /proc/loadavg was not read")
	}
	scans, probes := w.scans, w.probes
	cmd := exec.Command(link, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	found := false
	for range 50 {
		w.Poll()
		if found = w.holders[pid] != nil; found {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !found {
		t.Fatalf("process %d (%s) not found", pid, name)
	}
	if w.scans == scans && w.probes == probes {
		t.Fatal("found without reading a PID or listing /proc")
	}
	want(t, r.take(), fmt.Sprintf("give 0 named %d %s", pid, name), fmt.Sprintf("give 1 named %d %s", pid, name))
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	w.Poll()
	want(t, r.take(), "back 0", "back 1")
	t.Logf("found after %d listings and %d PIDs read", w.scans-scans, w.probes-probes)
}
