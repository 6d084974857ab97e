package podresources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// maxRecvMsgSize matches the kubelet's own PodResources client (16 MiB): a node with
// many pods answers with large lists.
const maxRecvMsgSize = 16 << 20

// Client keeps a GPU-to-pod map refreshed from the kubelet. Lookup, Owners and Snapshot
// are safe for concurrent use and never block on the kubelet.
type Client struct {
	socket string
	cfg    config
	log    *slog.Logger
	conn   *grpc.ClientConn
	lister podresourcesv1.PodResourcesListerClient
	start  time.Time

	devices atomic.Pointer[deviceMap]

	refreshMu sync.Mutex // one refresh at a time

	buildMu sync.Mutex                               // one build of the map at a time; guards the two below
	last    *podresourcesv1.ListPodResourcesResponse // the last good answer, rebuilt when ResourceSlices change
	warned  map[draDevice]string                     // unmapped DRA devices already logged, with why

	mu          sync.Mutex // guards the fields below
	up          bool
	lastGood    time.Time
	lastElapsed time.Duration
	errors      map[string]uint64

	closeOnce sync.Once
	closeErr  error
}

// New returns a Client for the kubelet socket (DefaultSocket when empty). It does not
// connect: call Run (or Refresh) to fill the map.
func New(socket string, opts ...Option) (*Client, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if socket == "" {
		socket = DefaultSocket
	}
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
		// Retry a lost kubelet at least once per refresh instead of grpc's 2-minute cap.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: cfg.interval},
			MinConnectTimeout: cfg.timeout,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("podresources: creating client for %s: %w", socket, err)
	}
	c := &Client{
		socket: socket,
		cfg:    cfg,
		log:    cfg.logger.With("source", "podresources"),
		conn:   conn,
		lister: podresourcesv1.NewPodResourcesListerClient(conn),
		start:  cfg.now(),
		errors: map[string]uint64{},
	}
	for _, r := range errorReasons {
		c.errors[r] = 0
	}
	return c, nil
}

// Run refreshes the map at once and then every refresh interval until ctx is done.
// Failures are logged, counted and retried at the next tick; Run returns nil when ctx
// ends.
func (c *Client) Run(ctx context.Context) error {
	t := time.NewTicker(c.cfg.interval)
	defer t.Stop()
	for {
		if err := c.Refresh(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("refreshing GPU owners failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh asks the kubelet once, within the call timeout, and publishes the new map.
func (c *Client) Refresh(ctx context.Context) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	begin := c.cfg.now()
	resp, err := c.list(ctx)
	elapsed := c.cfg.now().Sub(begin)

	if err != nil {
		c.mu.Lock()
		c.lastElapsed = elapsed
		c.errors[errorReason(err)]++
		c.up = false
		stale := !c.lastGood.IsZero() && c.cfg.now().Sub(c.lastGood) > c.cfg.maxStaleness
		c.mu.Unlock()
		if stale { // too old to trust
			c.buildMu.Lock()
			c.last = nil
			c.devices.Store(nil)
			c.buildMu.Unlock()
		}
		return err
	}
	c.buildMu.Lock()
	c.last = resp
	c.build()
	c.buildMu.Unlock()
	c.mu.Lock()
	c.lastElapsed = elapsed
	c.up, c.lastGood = true, c.cfg.now()
	c.mu.Unlock()
	return nil
}

// Rebuild maps the last kubelet answer again, without asking the kubelet: call it when what
// the DRA resolver knows changes (a ResourceSlice added or updated), so that a DRA device
// is attributed at once rather than at the next refresh. It does nothing before the first
// good answer.
func (c *Client) Rebuild() {
	c.buildMu.Lock()
	defer c.buildMu.Unlock()
	if c.last != nil {
		c.build()
	}
}

// build publishes the map of c.last and logs each DRA device that newly fails to map.
// The caller holds buildMu.
func (c *Client) build() {
	m := buildDeviceMap(c.last, &c.cfg, c.cfg.resolve)
	c.devices.Store(&m)
	for d, why := range m.unresolved {
		if c.warned[d] != why {
			c.log.Warn("a GPU allocated through DRA is not attributed: its UUID is not known",
				"driver", GPUDriver, "pool", d.pool, "device", d.device, "result", why, "hint", unresolvedHint[why])
		}
	}
	c.warned = m.unresolved // bounded by the devices of the last answer
}

// unresolvedHint says what to check for each result that leaves a DRA device unmapped.
var unresolvedHint = map[string]string{
	ResultUnknownDevice: "no ResourceSlice of driver " + GPUDriver + " on this node lists it yet: see cupti_resourceslices_watch_errors_total (RBAC: get, list, watch on resourceslices.resource.k8s.io)",
	ResultMIGNotFound:   "a MIG device the driver creates on demand that NVML does not list: it is created when the pod starts; NVML health must be on (--health.enabled) and may read MIG instances",
	ResultNoUUID:        "its ResourceSlice entry has no uuid attribute",
	resultNoSlices:      "the ResourceSlice informer is off (--kubernetes.resource-slices)",
}

func (c *Client) list(ctx context.Context) (*podresourcesv1.ListPodResourcesResponse, error) {
	if _, err := os.Stat(c.socket); err != nil {
		return nil, &socketError{path: c.socket, err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.timeout)
	defer cancel()
	resp, err := c.lister.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("podresources: listing pod resources on %s: %w", c.socket, err)
	}
	return resp, nil
}

// DeviceLabels is Lookup without ok (empty strings when no single pod holds the device):
// the exporter's pod labels of a device series (exporter.DeviceLabeler).
func (c *Client) DeviceLabels(uuid string) (pod, namespace, container string) {
	pod, namespace, container, _ = c.Lookup(uuid)
	return pod, namespace, container
}

// Lookup returns the pod and container holding the device with this UUID, through the
// device plugin or a DRA ResourceClaim. Several containers of one pod give the pod with an
// empty container. ok is false when no pod holds it, when several pods do (a shared GPU,
// time-sliced or one claim in several pods), or before the first refresh.
func (c *Client) Lookup(uuid string) (pod, namespace, container string, ok bool) {
	return holder(c.Owners(uuid))
}

// Owners returns every container holding the device, sorted by namespace, pod, container
// and claim. The slice is shared: do not modify it.
func (c *Client) Owners(uuid string) []Owner {
	m := c.devices.Load()
	if m == nil {
		return nil
	}
	return m.owners[deviceKey(uuid)]
}

// Claims returns the GPU and MIG devices that DRA ResourceClaims gave to containers in the
// last answer, sorted by UUID and holder. The slice is shared: do not modify it.
func (c *Client) Claims() []ClaimDevice {
	m := c.devices.Load()
	if m == nil {
		return nil
	}
	return m.claims
}

// Close releases the connection. Calls after Close fail; Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.conn.Close() })
	return c.closeErr
}

// Reasons for cupti_podresources_errors_total.
const (
	reasonSocketMissing    = "socket_missing"    // the socket file is absent: kubelet path not mounted
	reasonSocketPermission = "permission_denied" // the socket or the RPC refused us
	reasonUnavailable      = "unavailable"       // nothing listens, or the connection broke
	reasonTimeout          = "timeout"           // the kubelet did not answer within the timeout
	reasonRPC              = "rpc_error"         // any other gRPC failure
)

var errorReasons = []string{reasonSocketMissing, reasonSocketPermission, reasonUnavailable, reasonTimeout, reasonRPC}

type socketError struct {
	path string
	err  error
}

func (e *socketError) Error() string {
	msg := fmt.Sprintf("podresources: kubelet socket %s: %v", e.path, e.err)
	if errors.Is(e.err, fs.ErrNotExist) {
		msg += " (mount the host's /var/lib/kubelet/pod-resources into the exporter)"
	}
	return msg
}

func (e *socketError) Unwrap() error { return e.err }

func errorReason(err error) string {
	var se *socketError
	if errors.As(err, &se) {
		if errors.Is(se.err, fs.ErrPermission) {
			return reasonSocketPermission
		}
		return reasonSocketMissing
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return reasonTimeout
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded:
		return reasonTimeout
	case codes.Unavailable:
		return reasonUnavailable
	case codes.PermissionDenied, codes.Unauthenticated:
		return reasonSocketPermission
	}
	return reasonRPC
}
