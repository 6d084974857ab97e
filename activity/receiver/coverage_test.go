package receiver

import (
	"errors"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/activity/wire"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestServerCoverage: coverage frames reach the aggregator (traced seconds), a version-1
// sender is still served, and a span out of order drops the connection as malformed.
func TestServerCoverage(t *testing.T) {
	srv, agg := startServer(t)
	c := dial(t, srv.Path())
	enc := wire.NewEncoder(c)
	if err := errors.Join(enc.Hello(proc(1)),
		enc.Coverage([]record.Interval{{Start: 1e9, End: 3e9}, {Start: 3e9, End: 3.5e9, Lossy: true}}),
		enc.Goodbye(0, wire.Drops{})); err != nil {
		t.Fatal(err)
	}
	old := dial(t, srv.Path())
	enc1, err := wire.NewEncoderVersion(old, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(enc1.Hello(proc(2)), enc1.Records(0, []record.Record{{Kind: record.KindKernel, Start: 1, End: 2}}),
		enc1.Goodbye(1, wire.Drops{})); err != nil {
		t.Fatal(err)
	}
	bad := dial(t, srv.Path())
	enc = wire.NewEncoder(bad)
	if err := errors.Join(enc.Hello(proc(3)), enc.Coverage([]record.Interval{{Start: 5, End: 9}}),
		enc.Coverage([]record.Interval{{Start: 8, End: 20}})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, agg, "coverage, the old sender's record and the malformed drop", func(s *snapshot.Snapshot) bool {
		return value(t, s, "cupti_activity_traced_seconds_total", "complete") >= 2 &&
			value(t, s, "cupti_activity_records_total", "kernel") == 1 &&
			value(t, s, "cupti_activity_dropped_connections_total", "malformed") == 1
	})
	s := agg.Snapshot()
	// 2 s complete from the first sender plus 4 ns from the bad one before its bad frame.
	if v := value(t, s, "cupti_activity_traced_seconds_total", "complete"); v < 2 || v > 2+1e-8 {
		t.Errorf("complete traced seconds %g, want 2", v)
	}
	if v := value(t, s, "cupti_activity_traced_seconds_total", "lossy"); v != 0.5 {
		t.Errorf("lossy traced seconds %g, want 0.5", v)
	}
}
