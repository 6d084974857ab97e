package webhook

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NamespaceLabels answers the labels of a namespace (Namespaces does, from an informer).
type NamespaceLabels interface {
	Labels(ctx context.Context, name string) (map[string]string, error)
}

// Mutator decides whether and how to wire one pod. It holds no state between calls and is
// safe for concurrent use.
type Mutator struct {
	cfg        *Config
	namespaces NamespaceLabels
	o          options
	gpu        resourceMatcher
	library    string          // base name of the injection library
	volumes    map[string]bool // volume names of both wirings
}

// NewMutator returns a Mutator for the wiring cfg.
func NewMutator(cfg *Config, namespaces NamespaceLabels, opts ...Option) (*Mutator, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	o, err := newOptions(opts)
	if err != nil {
		return nil, err
	}
	m := &Mutator{cfg: cfg, namespaces: namespaces, o: o, gpu: resourceMatcher(o.gpuResources),
		library: path.Base(cfg.Node.library()), volumes: map[string]bool{}}
	for _, w := range []*Wiring{&cfg.Node, &cfg.Sidecar} {
		for _, v := range w.Volumes {
			m.volumes[v.Name] = true
		}
	}
	return m, nil
}

// Mutate returns the JSON patch for pod, created in namespace (nil: leave it as it is), and
// the result (one of Results). An error (the namespace cannot be read) comes with
// ResultNamespaceUnknown and no patch: the pod is admitted unwired.
func (m *Mutator) Mutate(ctx context.Context, pod *corev1.Pod, namespace string) ([]byte, string, error) {
	if m.o.excluded[namespace] {
		return nil, ResultExcludedNamespace, nil
	}
	if isOwnPod(pod, m.o.ownLabels) {
		return nil, ResultOwnPod, nil
	}
	if _, ok := pod.Annotations[WiringKey]; ok {
		return nil, ResultAlreadyWired, nil
	}
	if pod.Annotations[InjectKey] == injectDisabled {
		return nil, ResultOptedOut, nil
	}
	if m.wiredByHand(&pod.Spec) {
		return nil, ResultWiredByHand, nil
	}
	targets := m.gpu.gpuContainers(&pod.Spec)
	if len(targets) == 0 && pod.Annotations[InjectKey] != injectEnabled {
		return nil, ResultNotGPU, nil
	}
	nsLabels, err := m.namespaces.Labels(ctx, namespace)
	if err != nil {
		return nil, ResultNamespaceUnknown, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	result, explicit := optIn(pod, nsLabels)
	if result != "" {
		return nil, result, nil
	}
	if len(targets) == 0 && explicit {
		targets = allContainers(&pod.Spec)
	}
	mode, w, reason := m.chooseWiring(namespace, nsLabels)
	p, wired := m.build(pod, targets, mode, w, reason)
	b, err := p.marshal()
	if err != nil {
		return nil, ResultNothingToWire, fmt.Errorf("encoding the patch: %w", err)
	}
	if !wired {
		return b, ResultNothingToWire, nil
	}
	if mode == "sidecar" {
		return b, ResultWiredSidecar, nil
	}
	return b, ResultWiredNode, nil
}

// wiredByHand reports whether the pod already loads the library or mounts a volume of the
// wiring's name: wired by hand (or by the chart's sidecar templates), left as it is.
func (m *Mutator) wiredByHand(spec *corev1.PodSpec) bool {
	for _, v := range spec.Volumes {
		if m.volumes[v.Name] {
			return true
		}
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.Name == injectionEnv && path.Base(e.Value) == m.library {
					return true
				}
			}
		}
	}
	return false
}

// chooseWiring picks node mode unless the namespace's Pod Security level refuses hostPath.
func (m *Mutator) chooseWiring(namespace string, nsLabels map[string]string) (string, *Wiring, string) {
	if m.o.sidecarOnly {
		return "sidecar", &m.cfg.Sidecar, "node wiring is off (no exporter DaemonSet)"
	}
	level, labelled := nsLabels[PodSecurityEnforceKey]
	if !labelled {
		level = m.o.defaultPodSecurity
	}
	if hostPathRefused(level) {
		if labelled {
			return "sidecar", &m.cfg.Sidecar, fmt.Sprintf("namespace %s enforces Pod Security %q, which refuses hostPath", namespace, level)
		}
		return "sidecar", &m.cfg.Sidecar, fmt.Sprintf("namespace %s has no Pod Security label and the cluster default is taken as %q, which refuses hostPath", namespace, level)
	}
	if labelled {
		return "node", &m.cfg.Node, fmt.Sprintf("namespace %s enforces Pod Security %q, which allows hostPath", namespace, level)
	}
	return "node", &m.cfg.Node, fmt.Sprintf("namespace %s has no Pod Security label and the cluster default is taken as %q", namespace, level)
}

// build returns the patch wiring the target containers of pod; wired is false when every
// target was left alone (then the patch only adds the annotations that say why).
func (m *Mutator) build(pod *corev1.Pod, targets []containerRef, mode string, w *Wiring, reason string) (patch, bool) {
	var p patch
	var kept, skipped []string
	wired := 0
	for _, t := range targets {
		c := container(&pod.Spec, t)
		if _, ok := envValue(c, injectionEnv); ok {
			kept = append(kept, c.Name) // another tool's library: CUDA loads one only
			continue
		}
		if at := mountConflict(c, w); at != "" {
			skipped = append(skipped, fmt.Sprintf("%s: %s is mounted by another volume", c.Name, at))
			continue
		}
		wireContainer(&p, containerPath(t), c, w)
		wired++
	}
	annotations := map[string]string{}
	if len(kept) > 0 {
		annotations[KeptInjectionKey] = strings.Join(kept, ",")
	}
	if len(skipped) > 0 {
		sort.Strings(skipped)
		annotations[SkippedKey] = strings.Join(skipped, "; ")
	}
	if wired > 0 {
		annotations[WiringKey] = mode
		annotations[WiringReasonKey] = reason
		appendItems(&p, "/spec/volumes", len(pod.Spec.Volumes), w.Volumes)
		prependInitContainers(&p, len(pod.Spec.InitContainers), m.injected(w))
		setKeys(&p, "/metadata/labels", pod.Labels, w.PodLabels)
	}
	setKeys(&p, "/metadata/annotations", pod.Annotations, annotations)
	return p, wired > 0
}

// injected returns copies of the wiring's init containers that run as a non-root user
// unless they say otherwise: Pod Security "restricted" requires it, and they need no root
// (the emptyDir is writable by all).
func (m *Mutator) injected(w *Wiring) []corev1.Container {
	out := make([]corev1.Container, len(w.InitContainers))
	for i, c := range w.InitContainers {
		c = *c.DeepCopy()
		if c.SecurityContext == nil {
			c.SecurityContext = &corev1.SecurityContext{}
		}
		if c.SecurityContext.RunAsUser == nil {
			uid := m.o.sidecarUser
			c.SecurityContext.RunAsUser = &uid
		}
		if c.SecurityContext.RunAsNonRoot == nil && *c.SecurityContext.RunAsUser != 0 {
			yes := true
			c.SecurityContext.RunAsNonRoot = &yes
		}
		out[i] = c
	}
	return out
}

func container(spec *corev1.PodSpec, r containerRef) *corev1.Container {
	if r.init {
		return &spec.InitContainers[r.index]
	}
	return &spec.Containers[r.index]
}

func envValue(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}
