package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/kubepods"
)

// podInformerSyncWait is how long serve waits for the pod cache before accepting traced
// processes; processes that connect earlier are resolved on a retry (activity.WithPodRetry).
const podInformerSyncWait = 10 * time.Second

// podInformerSettings decides whether the pod informer runs and for which node, from
// kubernetes.pod_informer, kubernetes.node_name and the environment (getenv).
func podInformerSettings(cfg *Config, getenv func(string) string) (node string, on bool, err error) {
	node = nodeName(cfg, getenv)
	switch cfg.Kubernetes.PodInformer {
	case "off":
		return node, false, nil
	case "on":
		if node == "" {
			return "", false, errors.New("kubernetes.pod_informer is on but the node name is unknown: set --kubernetes.node-name or $NODE_NAME (downward API spec.nodeName)")
		}
		return node, true, nil
	}
	// auto: in a cluster (or with an explicit kubeconfig) and knowing the node.
	return node, inCluster(cfg, getenv) && node != "", nil
}

// nodeName is this node's name: kubernetes.node_name, else $NODE_NAME (the downward API's
// spec.nodeName); "" when neither says.
func nodeName(cfg *Config, getenv func(string) string) string {
	if cfg.Kubernetes.NodeName != "" {
		return cfg.Kubernetes.NodeName
	}
	return getenv("NODE_NAME")
}

// inCluster says whether the Kubernetes API can be reached without more settings: in a pod
// (the service's environment) or with an explicit kubeconfig.
func inCluster(cfg *Config, getenv func(string) string) bool {
	return getenv("KUBERNETES_SERVICE_HOST") != "" || cfg.Kubernetes.Kubeconfig != ""
}

// startPodInformer starts the pod informer when configured (nil when off) and waits a
// bounded time for its first list. In auto mode a client that cannot be set up (no service
// account token mounted) leaves the informer off with a warning; with "on" it is an error.
func startPodInformer(ctx context.Context, logger *slog.Logger, cfg *Config) (*kubepods.Resolver, error) {
	node, on, err := podInformerSettings(cfg, os.Getenv)
	if err != nil || !on {
		return nil, err
	}
	r, err := newPodInformer(cfg, node, logger)
	if err != nil {
		if cfg.Kubernetes.PodInformer == "on" {
			return nil, err
		}
		// auto: a pod without a service account token, for example; the hello labels processes.
		logger.Warn("pod informer off: traced processes are attributed from their hello only", "err", err)
		return nil, nil
	}
	go r.Run(ctx)
	wctx, cancel := context.WithTimeout(ctx, podInformerSyncWait)
	defer cancel()
	if r.WaitForSync(wctx) {
		logger.Info("attributing traced processes to pods from their cgroup", "node", node)
	} else if ctx.Err() == nil {
		logger.Warn("pod cache not synced yet; processes stay pending and are resolved when it is (see cupti_kubepods_watch_errors_total)",
			"node", node, "waited", podInformerSyncWait)
	}
	return r, nil
}

func newPodInformer(cfg *Config, node string, logger *slog.Logger) (*kubepods.Resolver, error) {
	client, err := kubepods.NewClient(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("setting up the pod informer: %w (or --kubernetes.pod-informer=off)", err)
	}
	r, err := kubepods.New(client, node, kubepods.WithLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("setting up the pod informer: %w", err)
	}
	return r, nil
}

// podResolver adapts the informer's lookup to the activity aggregator.
func podResolver(r *kubepods.Resolver) activity.PodResolver {
	return func(_ uint32, cgroup string) (activity.Pod, activity.PodState) {
		c, res := r.Lookup(cgroup)
		pod := activity.Pod{Name: c.Pod, Namespace: c.Namespace, Container: c.Name}
		switch res {
		case kubepods.Found:
			return pod, activity.PodFound
		case kubepods.Pending:
			return pod, activity.PodPending
		}
		return activity.Pod{}, activity.PodNotFound
	}
}
