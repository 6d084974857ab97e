package pipeline

import (
	"testing"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestReplayHealthCurrentNames: a recorded health family (its OTel name from the build that
// recorded it, no constant attributes) is served as this build describes it; a family this
// build does not know, or knows with other labels, stays as recorded.
func TestReplayHealthCurrentNames(t *testing.T) {
	labels := []string{"gpu", "uuid", "model", "pci_bus_id"}
	old := &snapshot.Desc{Name: "cupti_nvml_encoder_utilization_ratio", Kind: snapshot.KindGauge, Unit: "ratio",
		OTelName: "cupti.nvml.encoder.utilization", OTelUnit: "1", LabelNames: labels}
	unknown := &snapshot.Desc{Name: "cupti_gpu_future_thing", Kind: snapshot.KindGauge, OTelName: "cupti.gpu.future", LabelNames: labels}
	relabelled := &snapshot.Desc{Name: "cupti_gpu_power_watts", Kind: snapshot.KindGauge, OTelName: "hw.power", LabelNames: []string{"gpu"}}
	s := &snapshot.Snapshot{Families: []snapshot.Family{{Desc: old}, {Desc: unknown}, {Desc: relabelled}}}
	h := &replayHealth{}
	h.set(s)
	got := h.Snapshot().Families
	if d := got[0].Desc; d.OTelName != "hw.gpu.utilization" || len(d.OTelAttributes) != 1 || d.OTelAttributes[0] != (snapshot.Label{Name: "hw.gpu.task", Value: "encoder"}) {
		t.Errorf("recorded encoder family served as %s %v, want hw.gpu.utilization with hw.gpu.task=encoder", d.OTelName, d.OTelAttributes)
	}
	if got[1].Desc != unknown || got[2].Desc != relabelled {
		t.Error("a family this build does not describe (or with other labels) was replaced")
	}
	if s.Families[0].Desc != old {
		t.Error("the recorded snapshot was modified")
	}
}
