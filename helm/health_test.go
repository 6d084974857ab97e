package helm

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// TestHealthFlags checks the node exporter's NVML health flags: on with GPM by default (GPM
// kept reporting on an H200 while ncu held the PM counters), GPM and health each switchable.
func TestHealthFlags(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want, not    []string
	}{
		{"defaults", "", []string{"--health.enabled", "--health.interval=1s", "--health.gpm"}, []string{"--no-health.enabled"}},
		{"no gpm", "health: {gpm: false}", []string{"--health.enabled"}, []string{"--health.gpm", "--no-health.enabled"}},
		{"interval", "health: {interval: 5s}", []string{"--health.interval=5s"}, nil},
		{"off", "health: {enabled: false}", []string{"--no-health.enabled"}, []string{"--health.enabled", "--health.gpm"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, _ := render(t, tc.values)
			objs := decodeAll(t, ms)
			spec := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec
			args := container(t, spec, "exporter", false).Args
			for _, w := range tc.want {
				if !slices.Contains(args, w) {
					t.Errorf("args lack %s: %s", w, strings.Join(args, " "))
				}
			}
			for _, n := range tc.not {
				if slices.Contains(args, n) {
					t.Errorf("args have %s: %s", n, strings.Join(args, " "))
				}
			}
		})
	}
}
