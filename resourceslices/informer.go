package resourceslices

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// MIGLookup finds the MIG device that a GPU instance of profile giProfileID placed at
// placementStart on the GPU parentUUID is, and returns its MIG UUID (ok false: no such MIG
// device now). It must answer from memory.
type MIGLookup func(parentUUID string, giProfileID, placementStart int) (uuid string, ok bool)

// Informer keeps the ResourceSlices of one DRA driver on one node, trimmed to what
// Resolve reads. Resolve and Snapshot are safe for concurrent use and never block on the
// API server.
type Informer struct {
	driver, node string
	log          *slog.Logger
	factory      informers.SharedInformerFactory
	informer     cache.SharedIndexInformer
	mig          MIGLookup
	onChange     func()
	start        time.Time
	served       func(context.Context) (bool, error) // whether the API server serves resource.k8s.io/v1 ResourceSlices
	recheck      time.Duration                       // how often a cluster that does not is asked again

	watchErrors [len(errorReasons)]atomic.Uint64
	warnedMu    sync.Mutex
	warned      map[string]bool // watch error reasons already logged at warning level
}

// Option configures an Informer.
type Option func(*Informer)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(i *Informer) {
		if l != nil {
			i.log = l
		}
	}
}

// WithMIGLookup finds the UUIDs of MIG devices the driver creates on demand (its slices
// list them without one); without it they resolve to podresources.ResultMIGNotFound.
func WithMIGLookup(f MIGLookup) Option { return func(i *Informer) { i.mig = f } }

// WithOnChange calls f after every ResourceSlice added, changed or removed in the cache,
// on the informer's goroutine (it must not block long).
func WithOnChange(f func()) Option { return func(i *Informer) { i.onChange = f } }

// Index names of the cache.
const (
	deviceIndex = "device" // "<pool>/<device name>" of every device a slice lists
	poolIndex   = "pool"   // the slice's pool name
)

// New returns an Informer of the ResourceSlices of driver on node, listed and watched
// through client with the field selector spec.driver=<driver>,spec.nodeName=<node> (RBAC:
// get, list and watch on resourceslices.resource.k8s.io, cluster-wide). Call Run to fill
// the cache.
func New(client kubernetes.Interface, driver, node string, opts ...Option) (*Informer, error) {
	switch {
	case client == nil:
		return nil, errors.New("resourceslices: no Kubernetes client")
	case driver == "":
		return nil, errors.New("resourceslices: no DRA driver name")
	case node == "":
		return nil, errors.New("resourceslices: no node name: set --kubernetes.node-name or $NODE_NAME (the downward API's spec.nodeName)")
	}
	i := &Informer{driver: driver, node: node, log: slog.Default(), warned: map[string]bool{}, recheck: notServedRecheck}
	i.served = func(ctx context.Context) (bool, error) {
		list, err := client.Discovery().ServerResourcesForGroupVersionWithContext(ctx, resourcev1.SchemeGroupVersion.String())
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Name == "resourceslices" {
				return true, nil
			}
		}
		return false, nil
	}
	for _, o := range opts {
		o(i)
	}
	i.log = i.log.With("source", "resourceslices", "driver", driver, "node", node)
	i.start = time.Now()
	selector := fields.AndSelectors(
		fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorDriver, driver),
		fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, node)).String()
	i.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	i.informer = i.factory.Resource().V1().ResourceSlices().Informer()
	if err := i.informer.SetTransform(trimSlice); err != nil {
		return nil, fmt.Errorf("resourceslices: setting the transform: %w", err)
	}
	if err := i.informer.AddIndexers(cache.Indexers{deviceIndex: deviceKeys, poolIndex: poolKey}); err != nil {
		return nil, fmt.Errorf("resourceslices: adding the indexes: %w", err)
	}
	if err := i.informer.SetWatchErrorHandler(i.watchError); err != nil {
		return nil, fmt.Errorf("resourceslices: setting the watch error handler: %w", err)
	}
	if i.onChange != nil {
		changed := func(any) { i.onChange() }
		if _, err := i.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed,
		}); err != nil {
			return nil, fmt.Errorf("resourceslices: adding the event handler: %w", err)
		}
	}
	return i, nil
}

// notServedRecheck is how often a cluster that does not serve resource.k8s.io/v1
// ResourceSlices is asked again, rather than listing them (and failing) every 30 s from
// every node: its control plane may be upgraded under a running exporter.
const notServedRecheck = 5 * time.Minute

// Run starts the informer and returns when ctx ends. Until the first list is stored,
// Resolve answers podresources.ResultUnknownDevice for what it does not hold yet. On a
// cluster without resource.k8s.io/v1 ResourceSlices (Kubernetes before 1.34) it waits,
// asking discovery again every 5 minutes, and counts each answer as not_served.
func (i *Informer) Run(ctx context.Context) {
	for {
		ok, err := i.served(ctx)
		if ok || (err != nil && !apierrors.IsNotFound(err)) {
			break // served, or discovery failed otherwise: the informer retries and counts
		}
		if err == nil {
			err = apierrors.NewNotFound(resourcev1.Resource("resourceslices"), "")
		}
		i.watchError(nil, err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(i.recheck):
		}
	}
	i.factory.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), i.informer.HasSynced) {
			i.log.Info("ResourceSlice cache synced", "slices", len(i.informer.GetStore().ListKeys()))
		}
	}()
	<-ctx.Done()
	i.factory.Shutdown()
}

// WaitForSync waits until the cache holds the node's slices or ctx ends, and reports which.
func (i *Informer) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), i.informer.HasSynced)
}

// Reasons of cupti_resourceslices_watch_errors_total.
var errorReasons = [...]string{"forbidden", "not_served", "other"}

// watchError counts a failed list or watch by reason; the first of each reason is logged
// as a warning, the rest at debug level (the reflector retries with backoff, for ever).
// The cache keeps what it had: Resolve goes on answering from it.
func (i *Informer) watchError(_ *cache.Reflector, err error) {
	r := 2
	hint := ""
	switch {
	case apierrors.IsForbidden(err):
		r, hint = 0, "RBAC: the exporter's service account needs get, list and watch on resourceslices.resource.k8s.io"
	case apierrors.IsNotFound(err):
		r, hint = 1, "the API server does not serve resource.k8s.io/v1 ResourceSlices (Kubernetes 1.34 or later)"
	}
	i.watchErrors[r].Add(1)
	i.warnedMu.Lock()
	first := !i.warned[errorReasons[r]]
	i.warned[errorReasons[r]] = true
	i.warnedMu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	i.log.Log(context.Background(), level, "listing or watching ResourceSlices failed; GPUs allocated through DRA keep the pods known so far, new ones stay unattributed",
		"reason", errorReasons[r], "hint", hint, "err", err)
}

// deviceKeys is the device index function.
func deviceKeys(obj any) ([]string, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return nil, nil
	}
	keys := make([]string, 0, len(s.Spec.Devices))
	for _, d := range s.Spec.Devices {
		keys = append(keys, s.Spec.Pool.Name+"/"+d.Name)
	}
	return keys, nil
}

// poolKey is the pool index function.
func poolKey(obj any) ([]string, error) {
	if s, ok := obj.(*resourcev1.ResourceSlice); ok {
		return []string{s.Spec.Pool.Name}, nil
	}
	return nil, nil
}

// keptAttributes are the device attributes Resolve reads, unqualified as NVIDIA's driver
// publishes them (an unqualified name is in the driver's domain; the qualified spelling
// "gpu.nvidia.com/uuid" is kept and read too).
var keptAttributes = []string{attrUUID, attrType, attrParentUUID}

// trimSlice keeps only what Resolve reads, so that slices with many devices and their
// capacities and counters cost little memory.
func trimSlice(obj any) (any, error) {
	s, ok := obj.(*resourcev1.ResourceSlice)
	if !ok {
		return obj, nil // cache.DeletedFinalStateUnknown and the like
	}
	t := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, ResourceVersion: s.ResourceVersion},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: s.Spec.Driver, NodeName: s.Spec.NodeName,
			Pool: resourcev1.ResourcePool{Name: s.Spec.Pool.Name, Generation: s.Spec.Pool.Generation},
		},
	}
	if len(s.Spec.Devices) > 0 {
		t.Spec.Devices = make([]resourcev1.Device, len(s.Spec.Devices))
	}
	for k, d := range s.Spec.Devices {
		attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
		for _, name := range keptAttributes {
			for _, q := range []resourcev1.QualifiedName{resourcev1.QualifiedName(name), resourcev1.QualifiedName(s.Spec.Driver + "/" + name)} {
				if a, ok := d.Attributes[q]; ok && a.StringValue != nil {
					attrs[resourcev1.QualifiedName(name)] = resourcev1.DeviceAttribute{StringValue: a.StringValue}
				}
			}
		}
		t.Spec.Devices[k] = resourcev1.Device{Name: d.Name, Attributes: attrs}
	}
	return t, nil
}

// device finds a device of the newest generation of its pool in the cache. A cache still
// being filled answers for what it holds (the change notifications of the first list may
// come before it counts as synced).
func (i *Informer) device(pool, name string) (resourcev1.Device, bool) {
	idx := i.informer.GetIndexer()
	objs, err := idx.ByIndex(deviceIndex, pool+"/"+name)
	if err != nil || len(objs) == 0 {
		return resourcev1.Device{}, false
	}
	// Consumers consider a pool's slices of the highest generation only: a device only an
	// older generation lists is gone (KEP-4381; the driver republishes a pool with a new
	// generation and deletes the old slices after).
	newest := int64(-1 << 63)
	poolSlices, _ := idx.ByIndex(poolIndex, pool)
	for _, o := range poolSlices {
		if s, ok := o.(*resourcev1.ResourceSlice); ok && s.Spec.Pool.Generation > newest {
			newest = s.Spec.Pool.Generation
		}
	}
	for _, o := range objs {
		s, ok := o.(*resourcev1.ResourceSlice)
		if !ok || s.Spec.Pool.Generation != newest || s.Spec.NodeName == nil || *s.Spec.NodeName != i.node {
			continue
		}
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d, true
			}
		}
	}
	return resourcev1.Device{}, false
}

// stringAttr returns a kept string attribute of d.
func stringAttr(d resourcev1.Device, name string) string {
	if a, ok := d.Attributes[resourcev1.QualifiedName(name)]; ok && a.StringValue != nil {
		return strings.TrimSpace(*a.StringValue)
	}
	return ""
}
