package helm

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
)

// The series budget values become the exporter's flags, only those set; by default none,
// so the binary's defaults apply.
func TestSeriesBudgetValues(t *testing.T) {
	ms, _ := render(t, "")
	spec := decodeAll(t, ms)["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec
	exp := container(t, spec, "exporter", false)
	for _, p := range []string{"--activity.top-kernels", "--activity.kernel-histogram-split", "--attribution.kernel-families"} {
		noArgPrefix(t, exp, p)
	}
	ms, _ = render(t, `
seriesBudget:
  topKernels: 30
  kernelHistogramSplit: [gpu, pod]
  copyHistogramSplit: []
  podHistograms: true
  histogramBuckets: [0.001, 0.01, 1]
  attributionTopKernels: 0
  attributionKernelFamilies: [all]
  attributionPodFamilies: []
`)
	spec = decodeAll(t, ms)["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec
	wantArgs(t, container(t, spec, "exporter", false), "--activity.top-kernels=30", "--activity.kernel-histogram-split=gpu,pod",
		"--activity.copy-histogram-split=", "--activity.pod-histograms", "--activity.histogram-buckets=0.001,0.01,1",
		"--attribution.top-kernels=0", "--attribution.kernel-families=all", "--attribution.pod-families=")
}
