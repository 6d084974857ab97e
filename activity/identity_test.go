package activity

import (
	"encoding/json"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// A claimed hello naming a verified process's PID and start time reports a huge drop count and
// then a small one: the verified process's own reports are still taken in full (before, the
// claim added 1.1e12 to queue_full and the real process's reports were then refused as going
// backwards).
func TestClaimedSenderCannotTouchVerified(t *testing.T) {
	a := NewAggregator()
	real := &record.Process{PID: 7, StartTime: 99, Identity: record.IdentityVerified, DeviceUUIDs: []string{"GPU-a"}}
	fake := &record.Process{PID: 7, StartTime: 99, Identity: record.IdentityClaimed, DeviceUUIDs: []string{"GPU-a"}}
	a.Connect(real)
	a.Connect(fake)
	if err := a.SenderDrops(real, map[string]uint64{"queue_full": 10}); err != nil {
		t.Fatal(err)
	}
	if err := a.SenderDrops(fake, map[string]uint64{"queue_full": 1 << 39}); err != nil {
		t.Fatal(err)
	}
	if err := a.SenderDrops(fake, map[string]uint64{"queue_full": 1}); err == nil {
		t.Error("a claimed sender's counter going down was taken")
	}
	if err := a.SenderDrops(real, map[string]uint64{"queue_full": 30}); err != nil {
		t.Errorf("the verified process's next report refused: %v", err)
	}
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "queue_full").Value; v != 30+1<<39 {
		t.Errorf("queue_full %g, want %d (30 of the real process, the claimed one's own)", v, 30+1<<39)
	}
	for id, want := range map[string]float64{"verified": 1, "claimed": 1, "refused": 0} {
		if v := mustSample(t, s, "cupti_activity_identities_total", id).Value; v != want {
			t.Errorf("identities %s = %g, want %g", id, v, want)
		}
	}
}

// Without a pod resolver nothing can check a hello's pod: a verified or claimed process is
// left unlabelled (counted as unverified) unless hellos are trusted; a recorded one
// (IdentityUnchecked) keeps its labels.
func TestHelloPodsNeedTrust(t *testing.T) {
	for _, tc := range []struct {
		id    record.Identity
		trust bool
		pod   string
		res   string
	}{
		{record.IdentityVerified, false, "", resolvedUnverified},
		{record.IdentityClaimed, false, "", resolvedUnverified},
		{record.IdentityVerified, true, "p", resolvedHello},
		{record.IdentityClaimed, true, "p", resolvedHello},
		{record.IdentityUnchecked, false, "p", resolvedHello},
	} {
		a := NewAggregator(WithTrustHelloPods(tc.trust))
		p := &record.Process{PID: 1, Identity: tc.id, Pod: "p", Namespace: "n", DeviceUUIDs: []string{"GPU-a"}}
		a.Add(p, []record.Record{{Kind: record.KindKernel, Start: 1, End: 2, Name: "_Z1kv"}})
		s := a.Snapshot()
		if sample(t, s, "cupti_kernel_gpu_seconds_total", "0", "GPU-a", podNS(tc.pod), tc.pod, "") == nil {
			t.Errorf("%v trust=%v: no series with pod %q", tc.id, tc.trust, tc.pod)
		}
		if v := mustSample(t, s, "cupti_activity_pod_resolutions_total", tc.res).Value; v != 1 {
			t.Errorf("%v trust=%v: resolutions %s = %g, want 1", tc.id, tc.trust, tc.res, v)
		}
	}
}

func podNS(pod string) string {
	if pod == "" {
		return ""
	}
	return "n"
}

// Recordings keep a process's identity by name; old recordings have none (unchecked).
func TestIdentityJSON(t *testing.T) {
	for _, id := range []record.Identity{record.IdentityUnchecked, record.IdentityVerified, record.IdentityClaimed} {
		b, err := json.Marshal(record.Process{Identity: id})
		if err != nil {
			t.Fatal(err)
		}
		var back record.Process
		if err := json.Unmarshal(b, &back); err != nil || back.Identity != id {
			t.Errorf("%v: %s read back as %v (%v)", id, b, back.Identity, err)
		}
	}
	if err := json.Unmarshal([]byte(`{"identity":"trusted"}`), new(record.Process)); err == nil {
		t.Error("an unknown identity was read")
	}
}
