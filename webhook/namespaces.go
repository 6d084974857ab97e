package webhook

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// namespaceGetTimeout bounds the direct read of a namespace the cache does not hold yet,
// well inside the webhook's admission timeout.
const namespaceGetTimeout = time.Second

var namespaceLookups = prometheus.NewDesc("cupti_webhook_namespace_lookups_total",
	"Namespace label lookups by where the answer came from (cache, api) or error.", []string{"result"}, nil)

// Namespaces answers namespace labels from a shared informer, and from the API server for
// a namespace created so recently that the cache lacks it. Safe for concurrent use.
type Namespaces struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory
	lister  listersv1.NamespaceLister
	synced  cache.InformerSynced
	counts  *counters
}

// NewNamespaces returns a lookup over client; Start starts its informer.
func NewNamespaces(client kubernetes.Interface) *Namespaces {
	f := informers.NewSharedInformerFactory(client, 0)
	inf := f.Core().V1().Namespaces()
	n := &Namespaces{client: client, factory: f, lister: inf.Lister(), counts: newCounters("cache", "api", "error")}
	n.synced = inf.Informer().HasSynced
	return n
}

// Start runs the informer until ctx ends.
func (n *Namespaces) Start(ctx context.Context) { n.factory.Start(ctx.Done()) }

// WaitForSync returns true once the first list is stored, false if ctx ends first.
func (n *Namespaces) WaitForSync(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), n.synced)
}

// Labels returns the labels of namespace name.
func (n *Namespaces) Labels(ctx context.Context, name string) (map[string]string, error) {
	if ns, err := n.lister.Get(name); err == nil {
		n.counts.inc("cache")
		return ns.Labels, nil
	}
	ctx, cancel := context.WithTimeout(ctx, namespaceGetTimeout)
	defer cancel()
	ns, err := n.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		n.counts.inc("error")
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("namespace %s does not exist", name)
		}
		return nil, err
	}
	n.counts.inc("api")
	return maps.Clone(ns.Labels), nil
}

// Describe implements prometheus.Collector.
func (n *Namespaces) Describe(ch chan<- *prometheus.Desc) { ch <- namespaceLookups }

// Collect implements prometheus.Collector.
func (n *Namespaces) Collect(ch chan<- prometheus.Metric) { n.counts.collect(ch, namespaceLookups) }
