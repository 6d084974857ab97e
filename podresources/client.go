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

	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastElapsed = elapsed
	if err != nil {
		reason := errorReason(err)
		c.errors[reason]++
		c.up = false
		if !c.lastGood.IsZero() && c.cfg.now().Sub(c.lastGood) > c.cfg.maxStaleness {
			c.devices.Store(nil) // too old to trust
		}
		return err
	}
	m := buildDeviceMap(resp, &c.cfg)
	c.devices.Store(&m)
	c.up, c.lastGood = true, c.cfg.now()
	return nil
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

// Lookup returns the container holding the device with this UUID. ok is false when no
// container holds it, when several do (a shared GPU), or before the first refresh.
func (c *Client) Lookup(uuid string) (pod, namespace, container string, ok bool) {
	owners := c.Owners(uuid)
	if len(owners) != 1 {
		return "", "", "", false
	}
	o := owners[0]
	return o.Pod, o.Namespace, o.Container, true
}

// Owners returns every container holding the device, sorted by namespace, pod and
// container. The slice is shared: do not modify it.
func (c *Client) Owners(uuid string) []Owner {
	m := c.devices.Load()
	if m == nil {
		return nil
	}
	return (*m)[deviceKey(uuid)]
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
