package demo

import (
	"bytes"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/recording"
)

const catalogTSV = "../../testdata/gh100_pm_sampling_base_metrics.tsv"

// The synthetic generator (make synthetic) still makes a complete two-GPU recording, for
// trying dashboards on more than one GPU without hardware.
func TestSyntheticGenerator(t *testing.T) {
	var buf bytes.Buffer
	if err := Generate(&buf, catalogTSV); err != nil {
		t.Fatal(err)
	}
	r, err := recording.FromBytes(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if !s.Header.Synthetic || !s.Complete || len(s.Devices) != 2 || s.Samples == 0 || s.ActivityRecords == 0 {
		t.Fatalf("summary %+v", s)
	}
}

func TestEmbeddedRecording(t *testing.T) {
	r, err := recording.FromBytes(Recording())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if len(Recording()) > 3<<20 {
		t.Errorf("embedded recording is %d bytes, keep it under 3 MiB", len(Recording()))
	}
	// The demo is a real H200 run (scripts/gpu/validate.sh record), not the synthetic one.
	if s.Header.Synthetic || !s.Complete || len(s.Devices) == 0 || len(s.Catalog) == 0 || s.Samples == 0 || s.ActivityRecords == 0 {
		t.Fatalf("summary %+v", s)
	}
	if d := s.Last - s.First; d < 55e9 || d > 65e9 {
		t.Errorf("span %d ns, want about 60 s", d)
	}
	t.Logf("%d bytes, %d batches, %d samples, %d activity records", len(Recording()), s.Batches, s.Samples, s.ActivityRecords)
}
