package receiver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// connTap keeps the processes the Aggregator connected, as its listeners see them.
type connTap struct {
	mu    sync.Mutex
	procs []record.Process
	infos []activity.ProcessInfo
}

func (c *connTap) ProcessConnected(p *record.Process, info activity.ProcessInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, *p)
	c.infos = append(c.infos, info)
}
func (*connTap) Records(*record.Process, []record.Record)    {}
func (*connTap) Coverage(*record.Process, []record.Interval) {}
func (*connTap) ProcessDisconnected(*record.Process)         {}

func (c *connTap) last(t *testing.T) (record.Process, activity.ProcessInfo) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		n := len(c.procs)
		if n > 0 {
			defer c.mu.Unlock()
			return c.procs[n-1], c.infos[n-1]
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no process connected")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeProc writes a /proc tree in which this test process (the kernel's SO_PEERCRED answer
// for every connection of the test) runs in a container: PID nsPID in its own namespace,
// started ticks after a boot at btime, in cgroup cgroup.
func fakeProc(t *testing.T, nsPID int, btime, ticks uint64, cgroup string) string {
	t.Helper()
	root := t.TempDir()
	writeFakeProc(t, root, nsPID, btime, ticks, cgroup)
	return root
}

// writeFakeProc writes fakeProc's tree under root.
func writeFakeProc(t *testing.T, root string, nsPID int, btime, ticks uint64, cgroup string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(os.Getpid()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "stat"), "cpu  1 2 3\nintr 5\nbtime "+fmt.Sprint(btime)+"\nprocesses 9\n")
	// A command name with spaces and parentheses: fields are counted after the last ')'.
	write(filepath.Join(dir, "stat"), fmt.Sprintf("%d (py (thon) x) S 1 1 1 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 %d 2998272 413 0\n", os.Getpid(), ticks))
	write(filepath.Join(dir, "status"), fmt.Sprintf("Name:\tpython\nTgid:\t%d\nNSpid:\t%d\t%d\nPPid:\t1\n", os.Getpid(), os.Getpid(), nsPID))
	write(filepath.Join(dir, "cgroup"), cgroup+"\n")
}

const (
	realCgroup   = "0::/kubepods.slice/kubepods-pod11111111_2222_3333_4444_555555555555.slice/cri-containerd-aaaa.scope"
	victimCgroup = "0::/kubepods.slice/kubepods-pod99999999_8888_7777_6666_555555555555.slice/cri-containerd-bbbb.scope"
)

// resolverOf answers for the two cgroups above, and remembers what it was asked.
func resolverOf(asked *[]string, mu *sync.Mutex) activity.PodResolver {
	return func(_ uint32, cgroup string) (activity.Pod, activity.PodState) {
		mu.Lock()
		*asked = append(*asked, cgroup)
		mu.Unlock()
		switch cgroup {
		case realCgroup:
			return activity.Pod{Name: "real-pod", Namespace: "real", Container: "main"}, activity.PodFound
		case victimCgroup:
			return activity.Pod{Name: "victim-pod", Namespace: "prod", Container: "main"}, activity.PodFound
		}
		return activity.Pod{}, activity.PodNotFound
	}
}

// A process in a container says hello with its own namespace's PID and claims another pod and
// that pod's cgroup: the exporter takes its host PID, start time and cgroup from the kernel, and
// labels it with its real pod; the contradicting pod claim is counted.
func TestIdentityVerifiedFromKernel(t *testing.T) {
	const btime, ticks = 1_795_000_000, 123_456
	root := fakeProc(t, 7, btime, ticks, realCgroup)
	var (
		mu    sync.Mutex
		asked []string
		tap   connTap
	)
	agg := activity.NewAggregator(activity.WithPodResolver(resolverOf(&asked, &mu)), activity.WithListener(&tap))
	srv, _ := startServerAgg(t, agg, WithProcRoot(root))
	hello := record.Process{PID: 7, StartTime: btime*1e9 + ticks*1e7, DeviceUUIDs: []string{"GPU-aaaa"},
		Cgroup: victimCgroup, Pod: "victim-pod", Namespace: "prod", Container: "main"}
	if err := wire.NewEncoder(dial(t, srv.Path())).Hello(hello); err != nil {
		t.Fatal(err)
	}
	p, info := tap.last(t)
	if p.Identity != record.IdentityVerified || p.PID != uint32(os.Getpid()) || p.Cgroup != realCgroup || p.StartTime != hello.StartTime {
		t.Errorf("connected %+v, want verified, pid %d, the kernel's cgroup", p, os.Getpid())
	}
	if info.Namespace != "real" || info.Pod != "real-pod" {
		t.Errorf("labelled %s/%s, want real/real-pod", info.Namespace, info.Pod)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != realCgroup {
		t.Errorf("resolver asked about %q, want only the kernel's cgroup", asked)
	}
	mu.Unlock()
	s := agg.Snapshot()
	if v := value(t, s, "cupti_activity_identities_total", "verified"); v != 1 {
		t.Errorf("verified identities %g, want 1", v)
	}
	if v := value(t, s, "cupti_activity_refused_claims_total", "pod", "contradicted"); v != 1 {
		t.Errorf("contradicted pod claims %g, want 1", v)
	}
}

// A hello claiming another process's PID, or this process with another start time, is refused:
// the connection is closed, counted, and nothing of it is aggregated.
func TestIdentityContradictedRefused(t *testing.T) {
	const btime, ticks = 1_795_000_000, 123_456
	root := fakeProc(t, 7, btime, ticks, realCgroup)
	for _, tc := range []struct {
		claim string
		hello record.Process
	}{
		{"pid", record.Process{PID: 4242, StartTime: btime*1e9 + ticks*1e7}},
		{"pid", record.Process{PID: uint32(os.Getpid()), StartTime: btime*1e9 + ticks*1e7}}, // the host PID is not its own
		{"start_time", record.Process{PID: 7, StartTime: btime*1e9 + ticks*1e7 + 5e9}},
	} {
		t.Run(tc.claim, func(t *testing.T) {
			srv, agg := startServer(t, WithProcRoot(root))
			c := dial(t, srv.Path())
			enc := wire.NewEncoder(c)
			if err := enc.Hello(tc.hello); err != nil {
				t.Fatal(err)
			}
			enc.Drops(wire.Drops{wire.DropQueueFull: 1 << 39})
			waitFor(t, agg, "the refusal", func(s *snapshot.Snapshot) bool {
				return value(t, s, "cupti_activity_dropped_connections_total", "identity_refused") == 1
			})
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
				t.Errorf("connection still open after a refused hello: %v", err)
			}
			s := agg.Snapshot()
			if v := value(t, s, "cupti_activity_identities_total", "refused"); v != 1 {
				t.Errorf("refused identities %g, want 1", v)
			}
			if v := value(t, s, "cupti_activity_refused_claims_total", tc.claim, "contradicted"); v != 1 {
				t.Errorf("contradicted %s claims %g, want 1", tc.claim, v)
			}
			if v := value(t, s, "cupti_activity_dropped_records_total", "queue_full"); v != 0 {
				t.Errorf("queue_full %g taken from a refused connection", v)
			}
			if v := value(t, s, "cupti_activity_processes"); v != 0 {
				t.Errorf("%g processes connected", v)
			}
		})
	}
}

// A process the kernel cannot name (here: its /proc entry cannot be read, as for a process in a
// PID namespace the exporter does not see) is only claimed: its cgroup text is never given to
// the resolver, and its pod claim labels nothing unless hellos are trusted.
func TestIdentityClaimed(t *testing.T) {
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprint("trust=", trust), func(t *testing.T) {
			var (
				mu    sync.Mutex
				asked []string
				tap   connTap
			)
			agg := activity.NewAggregator(activity.WithPodResolver(resolverOf(&asked, &mu)), activity.WithListener(&tap),
				activity.WithTrustHelloPods(trust))
			srv, _ := startServerAgg(t, agg) // an empty /proc
			hello := record.Process{PID: 4242, StartTime: 1, DeviceUUIDs: []string{"GPU-aaaa"},
				Cgroup: victimCgroup, Pod: "victim-pod", Namespace: "prod"}
			if err := wire.NewEncoder(dial(t, srv.Path())).Hello(hello); err != nil {
				t.Fatal(err)
			}
			p, info := tap.last(t)
			if p.Identity != record.IdentityClaimed {
				t.Errorf("identity %v, want claimed", p.Identity)
			}
			mu.Lock()
			if len(asked) != 0 {
				t.Errorf("resolver asked about a claimed cgroup: %q", asked)
			}
			mu.Unlock()
			s := agg.Snapshot()
			if v := value(t, s, "cupti_activity_identities_total", "claimed"); v != 1 {
				t.Errorf("claimed identities %g, want 1", v)
			}
			wantPod, result := "", "unverified"
			if trust {
				wantPod, result = "victim-pod", "hello"
			}
			if info.Pod != wantPod {
				t.Errorf("pod label %q, want %q", info.Pod, wantPod)
			}
			if v := value(t, s, "cupti_activity_pod_resolutions_total", result); v != 1 {
				t.Errorf("pod resolutions %s = %g, want 1", result, v)
			}
		})
	}
}

// The real /proc: this test process says who it is, and the kernel agrees.
func TestIdentityVerifiedRealProc(t *testing.T) {
	var tap connTap
	agg := activity.NewAggregator(activity.WithListener(&tap))
	srv, _ := startServerAgg(t, agg, WithProcRoot("/proc"))
	self, err := readProc("/proc", int32(os.Getpid()), new(bootTime))
	if err != nil {
		t.Fatal(err)
	}
	hello := selfProc()
	hello.StartTime = self.startTime
	if err := wire.NewEncoder(dial(t, srv.Path())).Hello(hello); err != nil {
		t.Fatal(err)
	}
	p, _ := tap.last(t)
	cg, _ := os.ReadFile("/proc/self/cgroup")
	if p.Identity != record.IdentityVerified || p.Cgroup != strings.TrimRight(string(cg), "\n") {
		t.Errorf("connected as %v with cgroup %q, want verified with %q", p.Identity, p.Cgroup, cg)
	}
}

// Text no Kubernetes object or GPU could carry is refused at the socket, once per hello, and
// counted; what remains is valid label text (invalid UTF-8 in a pod label stopped every OTLP
// push).
func TestSanitizeHello(t *testing.T) {
	p := record.Process{Pod: "trainer-\xff", Namespace: "ml", Container: "Main_1", Executable: "/bin/\xfe",
		Cgroup: "0::/x", DeviceUUIDs: []string{"GPU-f1010203-0405-0607-0809-0a0b0c0d0e0f", "GPU-\xff", "", strings.Repeat("a", 65)}}
	got := sanitizeHello(&p)
	want := []string{"pod", "container", "device_uuid", "executable"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refused %v, want %v", got, want)
	}
	if p.Pod != "" || p.Namespace != "ml" || p.Container != "" || p.Executable != "/bin/\uFFFD" {
		t.Errorf("sanitized to %+v", p)
	}
	if u := p.DeviceUUIDs; u[0] != "GPU-f1010203-0405-0607-0809-0a0b0c0d0e0f" || u[1] != activity.InvalidDeviceUUID || u[2] != "" || u[3] != activity.InvalidDeviceUUID {
		t.Errorf("UUIDs %q", u)
	}
}

// A hello with an invalid pod name over the socket: the claim is counted once, and no series
// carries it.
func TestInvalidHelloTextCounted(t *testing.T) {
	srv, agg := startServerAgg(t, activity.NewAggregator(activity.WithTrustHelloPods(true)))
	c := dial(t, srv.Path())
	p := proc(5)
	p.Namespace = "ns\xff"
	enc := wire.NewEncoder(c)
	if err := enc.Hello(p); err != nil {
		t.Fatal(err)
	}
	if err := enc.Records(0, []record.Record{{Kind: record.KindKernel, Start: 1, End: 2, Name: "_Z1kv"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "the record", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_records_total", "kernel") == 1
	})
	s := agg.Snapshot()
	if v := value(t, s, "cupti_activity_refused_claims_total", "namespace", "invalid"); v != 1 {
		t.Errorf("invalid namespace claims %g, want 1", v)
	}
	for _, f := range s.Families {
		for _, sm := range f.Samples {
			for _, l := range sm.LabelValues {
				if strings.ContainsRune(l, 0xFFFD) || !utf8Valid(l) || strings.Contains(l, "pod-5") {
					t.Errorf("%s carries %q", f.Desc.Name, sm.LabelValues)
				}
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }
