package webhook

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// patchOp is one RFC 6902 operation. The webhook only adds: a field this build's API types
// do not know is never read back and rewritten, so it cannot be lost.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

type patch []patchOp

func (p *patch) add(path string, v any) { *p = append(*p, patchOp{Op: "add", Path: path, Value: v}) }

func (p patch) marshal() ([]byte, error) {
	if len(p) == 0 {
		return nil, nil
	}
	return json.Marshal(p)
}

// pointerEscape escapes a map key for a JSON pointer (RFC 6901).
func pointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// appendItems appends items to the list at path that holds n items; an empty list may be
// absent from the object, so it is added whole.
func appendItems[T any](p *patch, path string, n int, items []T) {
	if len(items) == 0 {
		return
	}
	if n == 0 {
		p.add(path, items)
		return
	}
	for _, it := range items {
		p.add(path+"/-", it)
	}
}

// setKeys sets kv in the string map at path (existing is its content), in key order,
// skipping keys that already hold the value.
func setKeys(p *patch, path string, existing, kv map[string]string) {
	keys := make([]string, 0, len(kv))
	for k, v := range kv {
		if cur, ok := existing[k]; !ok || cur != v {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	if existing == nil {
		m := make(map[string]string, len(keys))
		for _, k := range keys {
			m[k] = kv[k]
		}
		p.add(path, m)
		return
	}
	for _, k := range keys {
		p.add(path+"/"+pointerEscape(k), kv[k])
	}
}

// containerPath is the JSON pointer of a container in the pod.
func containerPath(r containerRef) string {
	if r.init {
		return "/spec/initContainers/" + strconv.Itoa(r.index)
	}
	return "/spec/containers/" + strconv.Itoa(r.index)
}

// downwardEnv is what names the pod and container in the library's hello: the exporter
// labels the container's kernels with it where the cgroup cannot (private cgroup
// namespaces, sidecars).
func downwardEnv(container string) []corev1.EnvVar {
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path}}
	}
	return []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: field("metadata.name")},
		{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")},
		{Name: "CONTAINER_NAME", Value: container},
	}
}

// wireContainer adds the wiring's env and mounts, and the downward-API variables, to the
// container at path, each only where the container lacks it.
func wireContainer(p *patch, path string, c *corev1.Container, w *Wiring) {
	has := make(map[string]bool, len(c.Env))
	for _, e := range c.Env {
		has[e.Name] = true
	}
	var env []corev1.EnvVar
	for _, e := range append(append([]corev1.EnvVar{}, w.Env...), downwardEnv(c.Name)...) {
		if !has[e.Name] {
			has[e.Name] = true
			env = append(env, e)
		}
	}
	appendItems(p, path+"/env", len(c.Env), env)
	mounted := make(map[string]bool, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = true
	}
	var mounts []corev1.VolumeMount
	for _, m := range w.VolumeMounts {
		if !mounted[m.Name] {
			mounts = append(mounts, m)
		}
	}
	appendItems(p, path+"/volumeMounts", len(c.VolumeMounts), mounts)
}

// mountConflict returns the path of a mount of c that the wiring would mount again under
// another volume (the API server refuses duplicate mount paths), or "".
func mountConflict(c *corev1.Container, w *Wiring) string {
	for _, m := range c.VolumeMounts {
		for _, wm := range w.VolumeMounts {
			if m.MountPath == wm.MountPath && m.Name != wm.Name {
				return m.MountPath
			}
		}
	}
	return ""
}

// prependInitContainers puts cs before the pod's own init containers, in order: the
// exporter sidecar must listen before any traced init container runs. Operations on the
// existing init containers must come before these (their indexes shift).
func prependInitContainers(p *patch, n int, cs []corev1.Container) {
	if n == 0 {
		appendItems(p, "/spec/initContainers", 0, cs)
		return
	}
	for i := len(cs) - 1; i >= 0; i-- {
		p.add("/spec/initContainers/0", cs[i])
	}
}
