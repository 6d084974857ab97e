package receiver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// A hello without a start time is refused (before, it was verified: the start time check
// was skipped, which let a process that exited have its PID's next owner verified in its
// place).
func TestHelloWithoutStartTimeRefused(t *testing.T) {
	const btime, ticks = 1_795_000_000, 123_456
	root := fakeProc(t, 7, btime, ticks, realCgroup)
	srv, agg := startServer(t, WithProcRoot(root))
	c := dial(t, srv.Path())
	if err := wire.NewEncoder(c).Hello(record.Process{PID: 7, DeviceUUIDs: []string{"GPU-a"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the hello judged", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_identities_total", "verified")+value(t, s, "cupti_activity_identities_total", "refused") > 0
	})
	s := agg.Snapshot()
	if v := value(t, s, "cupti_activity_identities_total", "verified"); v != 0 {
		t.Errorf("a hello with start time 0 verified (%g)", v)
	}
	if v := value(t, s, "cupti_activity_refused_claims_total", "start_time", "contradicted"); v != 1 {
		t.Errorf("contradicted start_time claims %g, want 1", v)
	}
}

// setNextPID makes pid the next PID the kernel hands out (root only), or skips the test.
func setNextPID(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
		t.Skipf("cannot choose the next PID (needs root in the PID namespace): %v", err)
	}
}

// startAs starts a holding helper with PID pid, trying until the kernel's next PID is it
// (other processes of the machine take PIDs too), or skips the test.
func startAs(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	for range 200 {
		setNextPID(t, pid)
		cmd := startHelper(t, "hold", "")
		if cmd.Process.Pid == pid {
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	t.Skipf("could not start a process as PID %d", pid)
	return nil
}

// The PID theft: a process connects, says hello and exits before the receiver
// accepts its connection (3,000 connections were queued ahead of it); its PID goes to a
// victim, whose /proc entry the receiver then read. Before, the connection was verified as
// the victim (2 of 2 runs): the victim's PID, start time and cgroup, so its pod. The receiver
// accepts here only once the victim holds the PID. With SO_PEERPIDFD the receiver knows the
// process that connected is gone (claimed); without it (the fallback, forced), the start time
// refuses the hello: 0, or the thief's own start, at least one tick before the victim's.
func TestPIDReuseNotVerifiedAsVictim(t *testing.T) {
	for _, tc := range []struct {
		name     string
		start    string // what the thief's hello claims
		fallback bool
	}{
		{"start-0", "0", false},
		{"own-start", "self", false},
		{"start-0-fallback", "0", true},
		{"own-start-fallback", "self", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.fallback && !peerPidfdSupported() {
				t.Skip("this kernel has no SO_PEERPIDFD (Linux 6.5)")
			}
			var tap connTap
			agg := activity.NewAggregator(activity.WithListener(&tap))
			path := filepath.Join(t.TempDir(), "activity.sock")
			opts := []Option{WithProcRoot("/proc")}
			if tc.fallback {
				opts = append(opts, withoutPeerPidfd())
			}
			srv, err := NewServer(path, agg, nil, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			thief := startHelper(t, "connect-exit", path, "CX_RECEIVER_START="+tc.start)
			if err := thief.Wait(); err != nil {
				t.Fatalf("thief: %v", err)
			}
			time.Sleep(30 * time.Millisecond) // the victim starts at least a tick later
			victim := startAs(t, thief.Process.Pid)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go srv.Serve(ctx)
			waitFor(t, agg, "the thief's hello judged", func(s *snapshot.Snapshot) bool {
				n := 0.0
				for _, id := range []string{"verified", "claimed", "refused"} {
					n += value(t, s, "cupti_activity_identities_total", id)
				}
				return n == 1
			})
			s := agg.Snapshot()
			if v := value(t, s, "cupti_activity_identities_total", "verified"); v != 0 {
				p, _ := tap.last(t)
				t.Errorf("the thief verified as the victim (pid %d, victim %d, start %d)", p.PID, victim.Process.Pid, p.StartTime)
			}
			// With a pidfd the thief is known gone: only claimed. Without, its start time
			// disagrees with the victim's: refused.
			want := "claimed"
			if tc.fallback {
				want = "refused"
			}
			if v := value(t, s, "cupti_activity_identities_total", want); v != 1 {
				t.Errorf("identities %s %g, want 1", want, v)
			}
		})
	}
}

// The fallback and the SO_PEERPIDFD path verify the same honest process alike.
func TestIdentityPaths(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprint("fallback=", fallback), func(t *testing.T) {
			if !fallback && !peerPidfdSupported() {
				t.Skip("this kernel has no SO_PEERPIDFD (Linux 6.5)")
			}
			var tap connTap
			opts := []Option{WithProcRoot("/proc")}
			if fallback {
				opts = append(opts, withoutPeerPidfd())
			}
			srv, _ := startServerAgg(t, activity.NewAggregator(activity.WithListener(&tap)), opts...)
			if err := wire.NewEncoder(dial(t, srv.Path())).Hello(selfProc()); err != nil {
				t.Fatal(err)
			}
			p, _ := tap.last(t)
			if p.Identity != record.IdentityVerified || p.PID != uint32(os.Getpid()) {
				t.Errorf("connected as %v pid %d, want verified %d", p.Identity, p.PID, os.Getpid())
			}
		})
	}
}

// alive and its fallback for kernels without PIDFD_GET_INFO (exited) follow a real process: alive
// while it runs, gone once it has exited and been reaped.
func TestPidfdAlive(t *testing.T) {
	cmd := startHelper(t, "hold", "")
	fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Skipf("no pidfd_open: %v", err)
	}
	defer unix.Close(fd)
	if !alive(fd) || exited(fd) {
		t.Errorf("a running process: alive %v, exited %v", alive(fd), exited(fd))
	}
	cmd.Process.Kill()
	cmd.Wait()
	if alive(fd) || !exited(fd) {
		t.Errorf("a reaped process: alive %v, exited %v", alive(fd), exited(fd))
	}
}
