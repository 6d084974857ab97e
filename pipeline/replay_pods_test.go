package pipeline

import (
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// TestReplayTrustsHelloPodsAsTold: a process recorded through the socket (its identity
// verified by the kernel) whose hello names a pod, as `record` writes it outside Kubernetes,
// replays with that pod's labels where --activity.trust-hello-pods is given, as live, and
// without them where it is not ("unverified"). Before, the replay ignored the flag.
func TestReplayTrustsHelloPodsAsTold(t *testing.T) {
	p := &record.Process{PID: 7, DeviceUUIDs: []string{"GPU-0"}, Identity: record.IdentityVerified,
		Namespace: "gpu-test", Pod: "p0-t-stream", Container: "c"}
	devices := func() []pmdata.Device { return []pmdata.Device{{Index: 0, UUID: "GPU-0"}} }
	for _, trust := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.Activity.TrustHelloPods = trust
		agg := activity.NewAggregator(replayActivityOptions(&cfg, devices, activity.NewBudget(int64(cfg.Activity.MemoryBudget)))...)
		replayFrames(t, agg, func(w *recording.Writer, t0 uint64) []error {
			return []error{
				w.WriteDevices(t0, devices()),
				w.WriteHello(t0, recording.ProcessEvent{Conn: 1, Process: p}),
				w.WriteActivity(t0+1, recording.ActivityBatch{Conn: 1, Records: []record.Record{{
					Kind: record.KindKernel, Name: "k", Start: t0, End: t0 + 1e6}}}),
				w.Close(t0 + 2e9),
			}
		})
		pods := map[string]bool{}
		results := map[string]float64{}
		for _, f := range agg.Snapshot().Families {
			switch f.Desc.Name {
			case "cupti_activity_pod_resolutions_total":
				for _, s := range f.Samples {
					results[s.LabelValues[0]] = s.Value
				}
			case "cupti_kernel_gpu_seconds_total":
				for _, s := range f.Samples {
					for i, l := range f.Desc.LabelNames {
						if l == "pod" {
							pods[s.LabelValues[i]] = true
						}
					}
				}
			}
		}
		want, result := "p0-t-stream", "hello"
		if !trust {
			want, result = "", "unverified"
		}
		if !pods[want] || len(pods) != 1 || results[result] != 1 {
			t.Errorf("trust-hello-pods %v: kernel GPU seconds of pods %v, resolutions %v; want pod %q, %s 1", trust, pods, results, want, result)
		}
	}
}
