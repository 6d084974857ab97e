package podresources

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// fakeKubelet serves the real PodResourcesLister gRPC service on a Unix socket.
type fakeKubelet struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	mu    sync.Mutex
	pods  []*podresourcesv1.PodResources
	delay time.Duration
	calls int
}

func (f *fakeKubelet) List(ctx context.Context, _ *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	f.mu.Lock()
	f.calls++
	delay, pods := f.delay, f.pods
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &podresourcesv1.ListPodResourcesResponse{PodResources: pods}, nil
}

func (f *fakeKubelet) set(delay time.Duration, pods ...*podresourcesv1.PodResources) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay, f.pods = delay, pods
}

// startKubelet serves f on a socket in a fresh directory and returns the socket path.
func startKubelet(t *testing.T, f *fakeKubelet) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listening on %s: %v", sock, err)
	}
	srv := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(srv, f)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return sock
}

func pod(ns, name string, ctrs ...*podresourcesv1.ContainerResources) *podresourcesv1.PodResources {
	return &podresourcesv1.PodResources{Namespace: ns, Name: name, Containers: ctrs}
}

func ctr(name, resource string, ids ...string) *podresourcesv1.ContainerResources {
	return &podresourcesv1.ContainerResources{Name: name, Devices: []*podresourcesv1.ContainerDevices{{ResourceName: resource, DeviceIds: ids}}}
}

func newClient(t *testing.T, sock string, opts ...Option) *Client {
	t.Helper()
	c, err := New(sock, append([]Option{WithTimeout(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wantOwner(t *testing.T, c *Client, uuid, pod, ns, container string) {
	t.Helper()
	p, n, ct, ok := c.Lookup(uuid)
	if !ok || p != pod || n != ns || ct != container {
		t.Errorf("Lookup(%q) = %q, %q, %q, %v; want %q, %q, %q, true", uuid, p, n, ct, ok, pod, ns, container)
	}
}

func wantNoOwner(t *testing.T, c *Client, uuid string) {
	t.Helper()
	if p, n, ct, ok := c.Lookup(uuid); ok {
		t.Errorf("Lookup(%q) = %q, %q, %q, true; want not found", uuid, p, n, ct)
	}
}

// metric returns the value of one series of the snapshot, failing when absent.
func metric(t *testing.T, s *snapshot.Snapshot, name string, labels ...string) float64 {
	t.Helper()
	for _, f := range s.Families {
		if f.Desc.Name != name {
			continue
		}
		for _, smp := range f.Samples {
			if equal(smp.LabelValues, labels) {
				return smp.Value
			}
		}
	}
	t.Fatalf("no series %s%v in snapshot", name, labels)
	return 0
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLookupMapsGPUsToContainers(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0,
		pod("ml", "trainer-0",
			ctr("main", "nvidia.com/gpu", "GPU-aaaa", "GPU-BBBB"),
			&podresourcesv1.ContainerResources{Name: "cpu-only"}),
		pod("ml", "mig-user", ctr("worker", "nvidia.com/mig-1g.10gb", "MIG-cccc")),
		pod("default", "nic", ctr("net", "example.com/nic", "GPU-dddd")),
		// Two time-sliced replicas of one GPU given to two pods: ambiguous.
		pod("a", "p1", ctr("c", "nvidia.com/gpu.shared", "GPU-eeee::0")),
		pod("b", "p2", ctr("c", "nvidia.com/gpu.shared", "GPU-eeee::1")),
		// Two replicas of one GPU in the same container: still one owner.
		pod("a", "p3", ctr("c", "nvidia.com/gpu", "GPU-ffff::0", "GPU-ffff::1")),
	)
	c := newClient(t, startKubelet(t, k))
	wantNoOwner(t, c, "GPU-aaaa") // before the first refresh
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	wantOwner(t, c, "GPU-aaaa", "trainer-0", "ml", "main")
	wantOwner(t, c, "gpu-bbbb", "trainer-0", "ml", "main") // case-insensitive
	wantOwner(t, c, "MIG-cccc", "mig-user", "ml", "worker")
	wantOwner(t, c, "GPU-ffff", "p3", "a", "c")
	wantNoOwner(t, c, "GPU-dddd") // not a GPU resource
	wantNoOwner(t, c, "GPU-eeee") // shared
	if got := c.Owners("GPU-eeee"); len(got) != 2 || got[0].Pod != "p1" || got[1].Pod != "p2" {
		t.Errorf("Owners(GPU-eeee) = %v; want p1 and p2", got)
	}
	s := c.Snapshot()
	if v := metric(t, s, "cupti_podresources_up"); v != 1 {
		t.Errorf("up = %v; want 1", v)
	}
	if v := metric(t, s, "cupti_podresources_devices", "exclusive"); v != 4 {
		t.Errorf("exclusive devices = %v; want 4", v)
	}
	if v := metric(t, s, "cupti_podresources_devices", "shared"); v != 1 {
		t.Errorf("shared devices = %v; want 1", v)
	}
	if v := metric(t, s, "cupti_podresources_last_refresh_timestamp_seconds"); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last refresh = %v; want about now", v)
	}
}

func TestRemovedPodDisappearsWithinOneRefresh(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0, pod("ml", "a", ctr("c", "nvidia.com/gpu", "GPU-1")), pod("ml", "b", ctr("c", "nvidia.com/gpu", "GPU-2")))
	c := newClient(t, startKubelet(t, k), WithRefreshInterval(20*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	waitFor(t, "GPU-1 attributed", func() bool { _, _, _, ok := c.Lookup("GPU-1"); return ok })
	k.set(0, pod("ml", "b", ctr("c", "nvidia.com/gpu", "GPU-2")))
	waitFor(t, "GPU-1 released", func() bool { _, _, _, ok := c.Lookup("GPU-1"); return !ok })
	wantOwner(t, c, "GPU-2", "b", "ml", "c")
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 5*time.Second, 5*time.Millisecond, cond)
}

func TestSlowKubeletTimesOutWithoutBlockingLookups(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0, pod("ml", "a", ctr("c", "nvidia.com/gpu", "GPU-1")))
	c := newClient(t, startKubelet(t, k))
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatalf("first Refresh: %v", err)
	}

	k.set(time.Hour) // never answers within the timeout
	refreshed := make(chan error)
	begin := time.Now()
	go func() { refreshed <- c.Refresh(context.Background()) }()
	time.Sleep(20 * time.Millisecond) // let the refresh reach the kubelet
	for i := 0; i < 100; i++ {
		lookupStart := time.Now()
		wantOwner(t, c, "GPU-1", "a", "ml", "c") // the last good map still answers
		c.Snapshot()
		if d := time.Since(lookupStart); d > 50*time.Millisecond {
			t.Fatalf("Lookup and Snapshot took %v during a slow refresh", d)
		}
	}
	err := <-refreshed
	if err == nil {
		t.Fatal("Refresh against a hanging kubelet succeeded")
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Refresh took %v; the call timeout is 200ms", d)
	}
	s := c.Snapshot()
	if v := metric(t, s, "cupti_podresources_up"); v != 0 {
		t.Errorf("up = %v after a timeout; want 0", v)
	}
	if v := metric(t, s, "cupti_podresources_errors_total", "timeout"); v != 1 {
		t.Errorf("errors{reason=timeout} = %v; want 1 (err: %v)", v, err)
	}
}

func TestUnreachableKubeletIsCountedByReason(t *testing.T) {
	dir := t.TempDir()
	missing := newClient(t, filepath.Join(dir, "absent.sock"))
	err := missing.Refresh(context.Background())
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Refresh with no socket: err = %v; want not-exist", err)
	}
	if v := metric(t, missing.Snapshot(), "cupti_podresources_errors_total", "socket_missing"); v != 1 {
		t.Errorf("errors{reason=socket_missing} = %v; want 1", v)
	}

	// A socket path nobody listens on: connection refused.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	c := newClient(t, stale)
	begin := time.Now()
	if err := c.Refresh(context.Background()); err == nil {
		t.Fatal("Refresh against a dead socket succeeded")
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Refresh took %v; the call timeout is 200ms", d)
	}
	s := c.Snapshot()
	if v := metric(t, s, "cupti_podresources_errors_total", "unavailable") + metric(t, s, "cupti_podresources_errors_total", "timeout"); v != 1 {
		t.Errorf("errors{reason=unavailable|timeout} = %v; want 1", v)
	}
	if v := metric(t, s, "cupti_podresources_up"); v != 0 {
		t.Errorf("up = %v; want 0", v)
	}
	if v := metric(t, s, "cupti_podresources_last_refresh_timestamp_seconds"); v != 0 {
		t.Errorf("last refresh = %v before any success; want 0", v)
	}
}

func TestStaleMapIsDroppedAfterMaxStaleness(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0, pod("ml", "a", ctr("c", "nvidia.com/gpu", "GPU-1")))
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	c := newClient(t, startKubelet(t, k), WithMaxStaleness(time.Minute), withClock(clock))
	if err := c.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	k.set(time.Hour)
	advance(30 * time.Second)
	c.Refresh(context.Background())
	wantOwner(t, c, "GPU-1", "a", "ml", "c") // 30 s old: kept
	advance(31 * time.Second)
	c.Refresh(context.Background())
	wantNoOwner(t, c, "GPU-1") // 61 s old: dropped
}

func TestNewRejectsBadResourcePatterns(t *testing.T) {
	if _, err := New("", WithResources()); err == nil {
		t.Error("New with no resources succeeded")
	}
	if _, err := New("", WithResources("nvidia.com/*gpu")); err == nil {
		t.Error("New with an inner wildcard succeeded")
	}
}

func TestLookupConcurrentSafe(t *testing.T) {
	k := &fakeKubelet{}
	k.set(0, pod("ml", "a", ctr("c", "nvidia.com/gpu", "GPU-1")))
	c := newClient(t, startKubelet(t, k))
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(2)
		go func() { defer wg.Done(); c.Refresh(context.Background()) }()
		go func() { defer wg.Done(); c.Lookup("GPU-1"); c.Snapshot() }()
	}
	wg.Wait()
	wantOwner(t, c, "GPU-1", "a", "ml", "c")
}
