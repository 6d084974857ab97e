package e2e

// Fair shares of the exporter's global tables (docs/security.md): a few containers cannot
// take every device slot or every connection slot from a newcomer. The containers are played
// by this test process moving itself between cgroups it creates (root only; skipped where
// the cgroup file system cannot be written): the exporter reads each connection's cgroup
// from /proc when it accepts it, as it does for a workload.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
)

// cgroupMover moves this process between cgroups it creates under a cgroup2 mount (else the
// pids hierarchy of cgroup v1), and back where it was at cleanup.
type cgroupMover struct {
	t       *testing.T
	base    string // the hierarchy's mount point
	home    string // this process's cgroup in it, to return to
	created []string
}

func newCgroupMover(t *testing.T) *cgroupMover {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("moving between cgroups needs root")
	}
	base, rel := cgroupHome(t)
	m := &cgroupMover{t: t, base: base, home: filepath.Join(base, rel)}
	t.Cleanup(func() {
		m.enter(m.home)
		for _, dir := range m.created {
			os.Remove(dir)
		}
	})
	return m
}

// cgroupHome finds a writable cgroup hierarchy and this process's cgroup in it.
func cgroupHome(t *testing.T) (mount, rel string) {
	t.Helper()
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Skipf("no mountinfo: %v", err)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skipf("no /proc/self/cgroup: %v", err)
	}
	find := func(fstype, option string) string {
		sc := bufio.NewScanner(bytes.NewReader(mounts))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			for i, x := range f {
				if x == "-" && i+3 < len(f) && f[i+1] == fstype && (option == "" || strings.Contains(f[i+3], option)) && !strings.HasPrefix(f[5], "ro") {
					return f[4]
				}
			}
		}
		return ""
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		switch {
		case len(parts) == 3 && parts[0] == "0" && find("cgroup2", "") != "":
			return find("cgroup2", ""), parts[2]
		case len(parts) == 3 && parts[1] == "pids" && find("cgroup", "pids") != "":
			mount, rel = find("cgroup", "pids"), parts[2]
		}
	}
	if mount == "" {
		t.Skip("no writable cgroup hierarchy")
	}
	return mount, rel
}

// into moves this process into a new cgroup named name (under the mount's root).
func (m *cgroupMover) into(name string) {
	m.t.Helper()
	dir := filepath.Join(m.base, "cupti-e2e-"+name)
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		m.t.Skipf("cannot create a cgroup: %v", err)
	}
	m.created = append(m.created, dir)
	m.enter(dir)
}

func (m *cgroupMover) enter(dir string) {
	m.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		m.t.Skipf("cannot move into cgroup %s: %v", dir, err)
	}
	// The exporter keeps a process's /proc entry a quarter of a second (its cache keyed by
	// pidfd): a process that moves is seen in its new cgroup after that.
	time.Sleep(300 * time.Millisecond)
}

// startActivityOnly runs the binary with the activity socket as its only source: PM sampling
// and NVML off, so the host's GPUs are unknown (it is never ready: it waits for /metrics).
func startActivityOnly(t *testing.T) (*exporterProc, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "activity.sock")
	return startServing(t, nil, nil, "/metrics", 15*time.Second, nil, "serve", "--no-pmsample.enabled", "--no-health.enabled", "--activity.socket="+sock), sock
}

func metric(fams map[string]*dto.MetricFamily, name string, l map[string]string) float64 {
	v, _ := series(fams, name, l)
	return v
}

// The attack on the device table, against the binary with PM sampling and NVML off
// (the host's GPUs unknown, so a verified process's devices are taken on its word): one
// container opens four hello-only connections declaring 64 made-up UUIDs each. Before, that
// filled the 256-device table, and an honest process of another container had all its 1,000
// records dropped as unknown_device.
func TestActivityDeviceTableFairShare(t *testing.T) {
	cg := newCgroupMover(t)
	p, sock := startActivityOnly(t)
	cg.into("attacker")
	for c := range 4 {
		uuids := make([]string, 64)
		for i := range uuids {
			uuids[i] = fmt.Sprintf("GPU-%08x-dead-beef-0000-000000000000", 64*c+i)
		}
		_, enc := dialActivity(t, sock)
		if err := enc.Hello(record.Process{PID: uint32(os.Getpid()), StartTime: selfStartTime(), DeviceUUIDs: uuids}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the attacker's connections", func() bool {
		_, fams := p.scrape(t)
		return metric(fams, "cupti_activity_processes", nil) == 4
	})
	cg.into("honest")
	real := honest()
	real.DeviceUUIDs = []string{fakeGPU0}
	c := sendKernels(t, sock, real, 1000, "_Z4realv")
	wire.NewEncoder(c).Goodbye(1000, wire.Drops{})
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the honest records counted or dropped", func() bool {
		_, fams = p.scrape(t)
		return metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})+
			metric(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": "unknown_device"}) >= 1000
	})
	counted := metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"})
	t.Logf("honest records counted %g, dropped as unknown_device %g", counted,
		metric(fams, "cupti_activity_dropped_records_total", map[string]string{"reason": "unknown_device"}))
	if counted != 1000 {
		t.Errorf("honest records counted %g, want 1000", counted)
	}
}

// The lock-out, against the binary: processes of 8 containers hold keep-alive
// connections (hello, then silence) up to their limit of 32 each, all 256 slots. Before, a
// process of a ninth container was refused (limit) and lost its 1,000 records.
func TestActivityConnectionSlotsFairShare(t *testing.T) {
	cg := newCgroupMover(t)
	p, sock := startFake(t)
	held := 0
	for i := range 8 {
		cg.into(fmt.Sprintf("keepalive-%d", i))
		for range 32 {
			_, enc := dialActivity(t, sock)
			if err := enc.Hello(honest()); err != nil {
				t.Fatal(err)
			}
			held++
		}
		waitFor(t, "the keep-alive connections", func() bool {
			_, fams := p.scrape(t)
			return metric(fams, "cupti_activity_processes", nil) == float64(held)
		})
	}
	cg.into("newcomer")
	_, enc := dialActivity(t, sock)
	if err := errors.Join(enc.Hello(honest()), enc.Records(0, kernels(1000, "_Z4realv")), enc.Goodbye(1000, wire.Drops{})); err != nil {
		t.Logf("the newcomer's writes: %v", err) // refused: its records are lost
	}
	var fams map[string]*dto.MetricFamily
	waitFor(t, "the newcomer counted or refused", func() bool {
		_, fams = p.scrape(t)
		return metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"}) == 1000 ||
			metric(fams, "cupti_activity_dropped_connections_total", map[string]string{"reason": "limit"}) > 0
	})
	t.Logf("newcomer's records %g; limit refusals %g; evicted_fair_share %g",
		metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"}),
		metric(fams, "cupti_activity_dropped_connections_total", map[string]string{"reason": "limit"}),
		metric(fams, "cupti_activity_dropped_connections_total", map[string]string{"reason": "evicted_fair_share"}))
	if v := metric(fams, "cupti_activity_records_total", map[string]string{"kind": "kernel"}); v != 1000 {
		t.Errorf("newcomer's records %g, want 1000", v)
	}
	if v := metric(fams, "cupti_activity_dropped_connections_total", map[string]string{"reason": "evicted_fair_share"}); v != 1 {
		t.Errorf("evicted_fair_share %g, want 1", v)
	}
}
