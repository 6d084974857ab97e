package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/cupti-exporter/cupti-exporter/kubepods"
	"github.com/cupti-exporter/cupti-exporter/podresources"
	"github.com/cupti-exporter/cupti-exporter/resourceslices"
)

// resourceSliceSettings decides whether the ResourceSlice informer runs and for which
// node, from kubernetes.resource_slices, the pod-resources socket, kubernetes.node_name
// and the environment (getenv). It maps devices the kubelet reports for DRA claims, so it
// is off without the PodResources API.
func resourceSliceSettings(cfg *Config, getenv func(string) string) (node string, on bool, err error) {
	node = nodeName(cfg, getenv)
	mode := cfg.Kubernetes.ResourceSlices
	switch {
	case mode == "off":
		return node, false, nil
	case mode == "on" && cfg.Kubelet.PodResourcesSocket == "":
		return "", false, errors.New("kubernetes.resource_slices is on but kubelet.pod_resources_socket is empty: the slices map the devices the PodResources API names")
	case mode == "on" && node == "":
		return "", false, errors.New("kubernetes.resource_slices is on but the node name is unknown: set --kubernetes.node-name or $NODE_NAME (downward API spec.nodeName)")
	case mode == "on":
		return node, true, nil
	}
	return node, inCluster(cfg, getenv) && node != "" && cfg.Kubelet.PodResourcesSocket != "", nil
}

// newPodResources sets up the GPU-to-pod map of the kubelet's PodResources API (nil when
// kubelet.pod_resources_socket is empty) and, when configured, the informer of the NVIDIA
// DRA driver's ResourceSlices that maps DRA-allocated devices to their UUIDs, the UUIDs of
// MIG devices created on demand coming from NVML health (pm.nvml, once it runs). Both run
// until ctx ends; resSlices is nil when its informer is off. In auto mode an informer that
// cannot be set up (no service account token) is left off with a warning.
func newPodResources(ctx context.Context, logger *slog.Logger, cfg *Config, pm pmSetup) (pods *podresources.Client, resSlices *resourceslices.Informer, err error) {
	sock := cfg.Kubelet.PodResourcesSocket
	if sock == "" {
		return nil, nil, nil
	}
	node, on, err := resourceSliceSettings(cfg, os.Getenv)
	if err != nil {
		return nil, nil, err
	}
	var built atomic.Pointer[podresources.Client] // the map, once made: slices call back into it
	opts := []podresources.Option{podresources.WithLogger(logger)}
	if on {
		resSlices, err = newResourceSlices(cfg, node, logger, migLookup(pm.nvml), func() {
			if c := built.Load(); c != nil {
				c.Rebuild() // a slice came or changed: map the last answer again now
			}
		})
		if err != nil && cfg.Kubernetes.ResourceSlices == "on" {
			return nil, nil, err
		}
		if err != nil {
			logger.Warn("ResourceSlice informer off: GPUs allocated through DRA stay unattributed", "err", err)
			resSlices = nil
		}
	}
	if resSlices != nil {
		opts = append(opts, podresources.WithDRA(resSlices.Resolve))
	}
	if pods, err = podresources.New(sock, opts...); err != nil {
		return nil, nil, fmt.Errorf("setting up pod attribution: %w", err)
	}
	built.Store(pods)
	go pods.Run(ctx)
	if resSlices != nil {
		go resSlices.Run(ctx)
		logger.Info("attributing GPUs allocated through DRA to pods", "driver", podresources.GPUDriver, "node", node)
	}
	return pods, resSlices, nil
}

func newResourceSlices(cfg *Config, node string, logger *slog.Logger, mig resourceslices.MIGLookup, onChange func()) (*resourceslices.Informer, error) {
	client, err := kubepods.NewClient(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("setting up the ResourceSlice informer: %w (or --kubernetes.resource-slices=off)", err)
	}
	return resourceslices.New(client, podresources.GPUDriver, node,
		resourceslices.WithLogger(logger), resourceslices.WithMIGLookup(mig), resourceslices.WithOnChange(onChange))
}

// migLookup finds MIG devices through the NVML health source once it runs (nil: serving
// a recording, no NVML).
func migLookup(g *nvmlGPUs) resourceslices.MIGLookup {
	return func(parent string, profile, start int) (string, bool) {
		if g == nil {
			return "", false
		}
		src := g.src.Load()
		if src == nil {
			return "", false
		}
		return src.MIGDeviceUUID(parent, profile, start)
	}
}
