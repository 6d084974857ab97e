package webhook

import (
	"errors"
	"fmt"
	"os"
	"path"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Wiring is what one mode adds to a pod: the init containers and volumes once per pod,
// the env and mounts to each GPU container, the labels to the pod.
type Wiring struct {
	InitContainers []corev1.Container   `json:"initContainers,omitempty"`
	Env            []corev1.EnvVar      `json:"env"`
	VolumeMounts   []corev1.VolumeMount `json:"volumeMounts"`
	Volumes        []corev1.Volume      `json:"volumes"`
	PodLabels      map[string]string    `json:"podLabels,omitempty"`
}

// Config holds both wirings. The chart renders it (templates/webhook-wiring.yaml) from the
// templates of the documented hand edits.
type Config struct {
	// Node: the DaemonSet's host folder through a hostPath volume.
	Node Wiring `json:"node"`
	// Sidecar: the library copied into an emptyDir and the exporter as a native sidecar,
	// for namespaces whose Pod Security level refuses hostPath.
	Sidecar Wiring `json:"sidecar"`
}

// injectionEnv is the variable that makes CUDA load an injection library.
const injectionEnv = "CUDA_INJECTION64_PATH"

// LoadConfig reads and checks a wiring file (YAML or JSON); unknown fields are errors.
func LoadConfig(file string) (*Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the wiring: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, fmt.Errorf("wiring %s: %w", file, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("wiring %s: %w", file, err)
	}
	return &c, nil
}

func (c *Config) validate() error {
	if len(c.Node.InitContainers) > 0 {
		return errors.New("node: no init containers (the DaemonSet copies the library)")
	}
	if len(c.Sidecar.InitContainers) == 0 {
		return errors.New("sidecar: the exporter's init containers are missing")
	}
	for _, m := range []struct {
		name string
		w    *Wiring
	}{{"node", &c.Node}, {"sidecar", &c.Sidecar}} {
		if err := m.w.validate(); err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
	}
	if path.Base(c.Node.library()) != path.Base(c.Sidecar.library()) {
		return fmt.Errorf("node and sidecar load different libraries (%s, %s)", c.Node.library(), c.Sidecar.library())
	}
	return nil
}

func (w *Wiring) validate() error {
	if w.library() == "" {
		return fmt.Errorf("env sets no %s", injectionEnv)
	}
	if len(w.Volumes) == 0 || len(w.VolumeMounts) == 0 {
		return errors.New("volumes and volumeMounts are required")
	}
	vols := map[string]bool{}
	for _, v := range w.Volumes {
		vols[v.Name] = true
	}
	for _, m := range w.VolumeMounts {
		if !vols[m.Name] {
			return fmt.Errorf("volumeMount %s names no volume of the wiring", m.Name)
		}
	}
	return nil
}

// library is the injection library's path, as the wiring sets it.
func (w *Wiring) library() string {
	for _, e := range w.Env {
		if e.Name == injectionEnv {
			return e.Value
		}
	}
	return ""
}
