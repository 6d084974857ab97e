package demo

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/recording"
)

var update = flag.Bool("update", false, "rewrite demo.cuptirec from the synthetic generator")

const catalogTSV = "../../testdata/gh100_pm_sampling_base_metrics.tsv"

// The embedded recording, while synthetic, is exactly what the generator makes now.
func TestEmbeddedSyntheticIsCurrent(t *testing.T) {
	var buf bytes.Buffer
	if err := Generate(&buf, catalogTSV); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("demo.cuptirec", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	r, err := recording.FromBytes(Recording())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Summary().Header.Synthetic {
		t.Skip("the embedded recording is a real one")
	}
	if !bytes.Equal(buf.Bytes(), Recording()) {
		t.Fatal("demo.cuptirec is stale: run go test ./recording/demo -update")
	}
}

func TestEmbeddedRecording(t *testing.T) {
	if *update {
		t.Skip("the embedded file is rewritten in this run")
	}
	r, err := recording.FromBytes(Recording())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Summary()
	if len(Recording()) > 3<<20 {
		t.Errorf("embedded recording is %d bytes, keep it under 3 MiB", len(Recording()))
	}
	if !s.Complete || len(s.Devices) != 2 || len(s.Catalog) == 0 || s.Samples == 0 || s.ActivityRecords == 0 {
		t.Fatalf("summary %+v", s)
	}
	if d := s.Last - s.First; d < 55e9 || d > 65e9 {
		t.Errorf("span %d ns, want about 60 s", d)
	}
	t.Logf("%d bytes, %d batches, %d samples, %d activity records", len(Recording()), s.Batches, s.Samples, s.ActivityRecords)
}
