package kubepods

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cupti-exporter/cupti-exporter/kubepods/cgroup"
)

// Result says how far a Lookup got.
type Result int

const (
	// NotInPod: the cgroup names no pod (a process outside Kubernetes, or one whose cgroup
	// namespace hides the path). Final: asking again gives the same answer.
	NotInPod Result = iota
	// Found: the pod (and the container, when the cgroup names one) is known.
	Found
	// Pending: the cgroup names a pod, or a container of a pod, that the cache does not
	// hold yet (not synced yet, or the kubelet has not reported the container's ID yet).
	// Ask again later; the Container returned holds what is known already.
	Pending
)

var resultNames = [...]string{NotInPod: "not_in_pod", Found: "found", Pending: "pending"}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Container names the Kubernetes container a process runs in.
type Container struct {
	Pod, Namespace, Name string
}

// mirrorAnnotation holds, on the mirror pod of a static pod, the UID the kubelet uses for
// the static pod's cgroup (the API server gives the mirror pod a UID of its own).
const mirrorAnnotation = "kubernetes.io/config.mirror"

// uidIndex indexes pods by metadata.uid and by their mirror annotation.
const uidIndex = "uid"

// Resolver maps a process's cgroup to its pod and container through an informer cache of
// the pods of one node. Lookup and Snapshot are safe for concurrent use and never block on
// the API server.
type Resolver struct {
	node     string
	log      *slog.Logger
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	start    time.Time
	now      func() time.Time

	lookups     [len(resultNames)]atomic.Uint64
	watchErrors atomic.Uint64
}

// Option configures a Resolver.
type Option func(*Resolver)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(r *Resolver) {
		if l != nil {
			r.log = l
		}
	}
}

// New returns a Resolver of the pods on node, listed and watched through client with the
// field selector spec.nodeName=<node> (RBAC: list and watch on pods, cluster-wide). Call
// Run to fill the cache.
func New(client kubernetes.Interface, node string, opts ...Option) (*Resolver, error) {
	if client == nil {
		return nil, errors.New("kubepods: no Kubernetes client")
	}
	if node == "" {
		return nil, errors.New("kubepods: no node name: set --kubernetes.node-name or $NODE_NAME (the downward API's spec.nodeName)")
	}
	r := &Resolver{node: node, log: slog.Default(), now: time.Now}
	for _, o := range opts {
		o(r)
	}
	r.log = r.log.With("source", "kubepods", "node", node)
	r.start = r.now()
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	r.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	r.informer = r.factory.Core().V1().Pods().Informer()
	if err := r.informer.SetTransform(trimPod); err != nil {
		return nil, fmt.Errorf("kubepods: setting the pod transform: %w", err)
	}
	if err := r.informer.AddIndexers(cache.Indexers{uidIndex: podUIDs}); err != nil {
		return nil, fmt.Errorf("kubepods: adding the UID index: %w", err)
	}
	if err := r.informer.SetWatchErrorHandler(r.watchError); err != nil {
		return nil, fmt.Errorf("kubepods: setting the watch error handler: %w", err)
	}
	return r, nil
}

// NewClient returns a Kubernetes client from the kubeconfig file at path, or from the pod's
// service account (in-cluster) when path is empty.
func NewClient(kubeconfig string) (kubernetes.Interface, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubepods: in-cluster configuration: %w (mount the service account token, or pass --kubernetes.kubeconfig)", err)
		}
	} else if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, fmt.Errorf("kubepods: reading kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = "cupti-exporter"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubepods: creating the Kubernetes client: %w", err)
	}
	return c, nil
}

// Run starts the informer and returns when ctx ends. Lookups answer Pending until the
// first list has been stored.
func (r *Resolver) Run(ctx context.Context) {
	r.factory.Start(ctx.Done())
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
			r.log.Info("pod cache synced", "pods", len(r.informer.GetStore().ListKeys()))
		}
	}()
	<-ctx.Done()
	r.factory.Shutdown()
}

// WaitForSync waits until the cache holds the node's pods or ctx ends, and reports which.
func (r *Resolver) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced)
}

func (r *Resolver) watchError(_ *cache.Reflector, err error) {
	r.watchErrors.Add(1)
	r.log.Warn("listing or watching pods failed (RBAC: the exporter's service account needs get, list and watch on pods)", "err", err)
}

// Lookup parses a process's cgroup text (the contents of /proc/<pid>/cgroup) and finds the
// pod and container it names in the cache. It does no I/O.
func (r *Resolver) Lookup(cgroup string) (Container, Result) {
	c, res := r.lookup(cgroup)
	r.lookups[res].Add(1)
	return c, res
}

func (r *Resolver) lookup(text string) (Container, Result) {
	ref, ok := cgroup.Parse(text)
	if !ok {
		return Container{}, NotInPod
	}
	if !r.informer.HasSynced() {
		return Container{}, Pending
	}
	objs, err := r.informer.GetIndexer().ByIndex(uidIndex, ref.PodUID)
	if err != nil {
		return Container{}, Pending
	}
	for _, o := range objs {
		pod, ok := o.(*corev1.Pod)
		if !ok || pod.Spec.NodeName != r.node {
			continue
		}
		c := Container{Pod: pod.Name, Namespace: pod.Namespace}
		if ref.ContainerID == "" {
			return c, Found
		}
		if c.Name = containerName(pod, ref.ContainerID); c.Name == "" {
			return c, Pending // the kubelet has not reported the container's ID yet
		}
		return c, Found
	}
	return Container{}, Pending
}

// containerName finds the container with this runtime ID among the pod's container,
// init container and ephemeral container statuses.
func containerName(pod *corev1.Pod, id string) string {
	for _, list := range [][]corev1.ContainerStatus{
		pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses,
	} {
		for i := range list {
			if StripRuntime(list[i].ContainerID) == id {
				return list[i].Name
			}
		}
	}
	return ""
}

// StripRuntime turns a status containerID ("containerd://<id>", "cri-o://<id>",
// "docker://<id>") into the bare ID that cgroup paths carry.
func StripRuntime(containerID string) string {
	if _, id, ok := strings.Cut(containerID, "://"); ok {
		return id
	}
	return containerID
}

// podUIDs is the UID index function: the pod's UID and, for a mirror pod, the static pod's.
func podUIDs(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	keys := []string{strings.ToLower(string(pod.UID))}
	if m := pod.Annotations[mirrorAnnotation]; m != "" {
		keys = append(keys, strings.ToLower(m))
	}
	return keys, nil
}

// trimPod keeps only what Lookup reads, so the cache of a node with many pods stays small.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // cache.DeletedFinalStateUnknown and the like
	}
	t := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName},
		Status: corev1.PodStatus{
			ContainerStatuses:          trimStatuses(pod.Status.ContainerStatuses),
			InitContainerStatuses:      trimStatuses(pod.Status.InitContainerStatuses),
			EphemeralContainerStatuses: trimStatuses(pod.Status.EphemeralContainerStatuses),
		},
	}
	if m := pod.Annotations[mirrorAnnotation]; m != "" {
		t.Annotations = map[string]string{mirrorAnnotation: m}
	}
	return t, nil
}

func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		out[i] = corev1.ContainerStatus{Name: in[i].Name, ContainerID: in[i].ContainerID}
	}
	return out
}
