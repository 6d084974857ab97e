package exporter

import (
	"fmt"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// The activity aggregator ranks its pod series by who vouches for the pod, so that 10,000
// claimed pods (hellos naming pods, trusted) fold into the overflow series before a pod the
// kernel's cgroup verified and before the series without a pod of every GPU (before the
// ranks, the cap kept the first series in label order: zz-prod/zz-legit and every gpu="1"
// series vanished).
func TestClaimedPodsDoNotHideVerified(t *testing.T) {
	const cgLegit = "0::/kubepods/podlegit/ctr"
	resolver := func(_ uint32, cgroup string) (activity.Pod, activity.PodState) {
		if cgroup == cgLegit {
			return activity.Pod{Name: "zz-legit", Namespace: "zz-prod", Container: "main"}, activity.PodFound
		}
		return activity.Pod{}, activity.PodNotFound
	}
	uuids := []string{"GPU-0000", "GPU-1111"}
	agg := activity.NewAggregator(activity.WithTrustHelloPods(true), activity.WithPodResolver(resolver),
		activity.WithGPUResolver(func(uuid string) (string, bool) {
			for i, u := range uuids {
				if u == uuid {
					return fmt.Sprint(i), true
				}
			}
			return "", false
		}))
	rec := []record.Record{{Kind: record.KindKernel, Device: 0, Start: 1, End: 1001, Name: "_Z1kv"}}
	send := func(p *record.Process) {
		agg.Connect(p)
		agg.Add(p, rec)
	}
	for i := range 10_000 {
		send(&record.Process{PID: uint32(1000 + i), Identity: record.IdentityClaimed, DeviceUUIDs: uuids[:1],
			Pod: fmt.Sprintf("aa-claimed-%05d", i), Namespace: "aa"})
	}
	send(&record.Process{PID: 7, Identity: record.IdentityVerified, Cgroup: cgLegit, DeviceUUIDs: uuids[1:]})
	for i, u := range uuids { // processes outside pods on each GPU
		send(&record.Process{PID: uint32(20 + i), Identity: record.IdentityVerified, Cgroup: "0::/system.slice/x", DeviceUUIDs: []string{u}})
	}
	e := New(nil)
	e.Register("activity", agg)
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var legit, overflow bool
	noPod := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "cupti_kernel_gpu_seconds_total" {
			continue
		}
		t.Logf("%s: %d series", mf.GetName(), len(mf.GetMetric()))
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			legit = legit || ls["pod"] == "zz-legit" && ls["gpu"] == "1"
			overflow = overflow || ls["pod"] == overflowLabel
			if ls["pod"] == "" {
				noPod[ls["gpu"]] = true
			}
		}
	}
	if !legit || !overflow || !noPod["0"] || !noPod["1"] {
		t.Errorf("verified pod served %v, overflow series %v, series without a pod by gpu %v: want all", legit, overflow, noPod)
	}
}
