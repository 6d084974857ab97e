package receiver

// Child processes for the identity tests: the test binary, run again with CX_RECEIVER_HELPER
// set, plays one client of the socket (a process of its own, with its own PID and /proc
// entry, as a workload is).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("CX_RECEIVER_HELPER"); mode != "" {
		if err := helper(mode, os.Getenv("CX_RECEIVER_SOCKET")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper plays one client:
//
//	connect-exit: hello (its own PID, the start time of CX_RECEIVER_START: "self" or a number),
//	              then exit without waiting for the receiver
//	short:        hello with its true start time, "connected" on stdout, a line on stdin, then
//	              a life of CX_RECEIVER_LIFE (a duration), 100 kernel records, goodbye, exit
//	hold:         wait until stdin closes (a process that holds its PID)
//	flood:        dial CX_RECEIVER_QUEUED connections and hold them, print "ready", wait to be killed
func helper(mode, sock string) error {
	switch mode {
	case "hold":
		_, err := io.Copy(io.Discard, os.Stdin)
		return err
	case "flood":
		return flood(sock)
	case "connect-exit", "short":
	default:
		return fmt.Errorf("unknown helper mode %q", mode)
	}
	self, err := readProc("/proc", int32(os.Getpid()), new(bootTime))
	if err != nil {
		return err
	}
	hello := record.Process{PID: uint32(os.Getpid()), StartTime: self.startTime, Executable: "/helper", DeviceUUIDs: []string{"GPU-a"}}
	if s := os.Getenv("CX_RECEIVER_START"); s != "" && s != "self" {
		if hello.StartTime, err = strconv.ParseUint(s, 10, 64); err != nil {
			return err
		}
	}
	c, err := dialRetry(sock)
	if err != nil {
		return err
	}
	enc := wire.NewEncoder(c)
	if err := enc.Hello(hello); err != nil {
		return err
	}
	if mode == "short" {
		fmt.Println("connected")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return err
		}
		if life, err := time.ParseDuration(os.Getenv("CX_RECEIVER_LIFE")); err == nil {
			time.Sleep(life)
		}
		recs := make([]record.Record, 100)
		now := uint64(time.Now().UnixNano())
		for i := range recs {
			recs[i] = record.Record{Kind: record.KindKernel, Start: now - 2000, End: now - 1000, Name: "_Z5shortv"}
		}
		if err := errors.Join(enc.Records(0, recs), enc.Goodbye(100, wire.Drops{})); err != nil {
			return err
		}
	}
	return nil // exits with the connection open in the kernel's hands: nothing waits for the receiver
}

// helperCmd is the test binary as a helper client in mode on sock, not started.
func helperCmd(mode, sock string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"CX_RECEIVER_HELPER=" + mode, "CX_RECEIVER_SOCKET=" + sock}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startHelper starts the test binary as a helper client in mode.
func startHelper(t testing.TB, mode, sock string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := helperCmd(mode, sock, env...)
	if mode == "flood" {
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitLine(t, bufio.NewReader(out)) // "ready"
		return cmd
	}
	if mode == "hold" {
		if _, err := cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// dialRetry connects as the injection library does: a full backlog (EAGAIN) is retried after
// 100 ms, doubling to 5 s, for at most 30 s.
func dialRetry(sock string) (net.Conn, error) {
	wait := 100 * time.Millisecond
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", sock)
		if err == nil || time.Now().After(deadline) {
			return c, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}

// flood dials CX_RECEIVER_QUEUED connections to sock and holds them (silent: the receiver
// evicts them in turn, or refuses them), retrying a full backlog after a millisecond.
func flood(sock string) error {
	queued, err := strconv.Atoi(os.Getenv("CX_RECEIVER_QUEUED"))
	if err != nil {
		return err
	}
	held := make([]net.Conn, 0, queued)
	for len(held) < queued {
		c, err := net.Dial("unix", sock)
		if err != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		held = append(held, c)
	}
	fmt.Println("ready")
	select {}
}

// startShort starts a short-lived helper on sock, returns once it has said hello, and gives
// the function that starts its life (it exits life later).
func startShort(t testing.TB, sock string, life time.Duration) (*exec.Cmd, func()) {
	t.Helper()
	cmd := helperCmd("short", sock, "CX_RECEIVER_LIFE="+life.String())
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitLine(t, bufio.NewReader(out)) // "connected"
	return cmd, func() { io.WriteString(in, "go\n") }
}
