package e2e

import (
	"testing"
)

// TestReplayEndAttributesAll: when a recording's last sample has been replayed, the first
// scrape serves it all attributed, not what waited for the watermark (a watermark of wall
// time later, as live sampling that stopped would). Tests and scripts that scrape a replay
// once it says it finished read final figures.
func TestReplayEndAttributesAll(t *testing.T) {
	recPath, gpus := nodeRecording(t, 2)
	// A watermark far longer than the test: without the flush at the source's end the last
	// 30 s of samples (the whole recording) would still wait when the replay finishes.
	p := start(t, "replay", recPath, "--replay.speed=0", "--attribution.watermark=30s")
	waitReplayEnd(t, p)
	_, fams := p.scrape(t)
	for i, uuid := range gpus {
		lag, ok := find(fams, "cupti_attribution_lag_seconds", map[string]string{"uuid": uuid})
		if !ok || value(lag) != 0 {
			t.Errorf("GPU %d: attribution lag %v once the replay finished; want 0 (every sample attributed)", i, lag)
		}
		var attributed float64
		for _, m := range fams["cupti_attribution_seconds_total"].GetMetric() {
			if labels(m)["uuid"] == uuid {
				attributed += value(m)
			}
		}
		if attributed < 4 { // the recording covers 5 s of every GPU
			t.Errorf("GPU %d: %.3f s attributed once the replay finished; want the recording's 5 s", i, attributed)
		}
	}
}
