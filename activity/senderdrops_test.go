package activity

import (
	"math"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// TestSenderDropsCannotBeCorrupted: the report of 2^63+1 dropped records, twice,
// took the counter from 9.2e18 down to 2. Now both are refused and counted, and the
// counter never goes down.
func TestSenderDropsCannotBeCorrupted(t *testing.T) {
	a := NewAggregator()
	p := testProcess(7)
	a.Connect(p)
	if err := a.SenderDrops(p, map[string]uint64{"queue_full": 100}); err != nil {
		t.Fatal(err)
	}
	huge := uint64(1)<<63 + 1
	for i := range 2 {
		err := a.SenderDrops(p, map[string]uint64{"queue_full": huge})
		if err == nil || !strings.Contains(err.Error(), "jumped") {
			t.Errorf("report %d of 2^63+1: err = %v, want a refusal", i, err)
		}
	}
	if err := a.SenderDrops(p, map[string]uint64{"queue_full": 150}); err != nil {
		t.Errorf("a plausible report after the refused ones: %v", err)
	}
	err := a.SenderDrops(p, map[string]uint64{"queue_full": 120})
	if err == nil || !strings.Contains(err.Error(), "went down from 150 to 120") {
		t.Errorf("a decrease on one connection: err = %v", err)
	}
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "queue_full").Value; v != 150 {
		t.Errorf("queue_full %g, want 150", v)
	}
	if v := mustSample(t, s, "cupti_activity_invalid_reports_total", "drops_jump").Value; v != 2 {
		t.Errorf("drops_jump %g, want 2", v)
	}
	if v := mustSample(t, s, "cupti_activity_invalid_reports_total", "drops_backwards").Value; v != 1 {
		t.Errorf("drops_backwards %g, want 1", v)
	}
}

// TestSenderDropsStaleConnection: the library sends its final counters on a new
// connection when the exporter stopped reading; the old connection's frames may be read
// after them. Their lower counts are stale, neither added nor counted as invalid.
func TestSenderDropsStaleConnection(t *testing.T) {
	a := NewAggregator()
	old, fresh := testProcess(9), testProcess(9) // same pid and start time
	a.Connect(old)
	a.Connect(fresh)
	for _, r := range []struct {
		p *record.Process
		v uint64
	}{{old, 10}, {fresh, 5000}, {old, 20}, {old, 30}, {fresh, 5001}} {
		if err := a.SenderDrops(r.p, map[string]uint64{"queue_full": r.v, "cupti_dropped": 1}); err != nil {
			t.Errorf("report %d: %v", r.v, err)
		}
	}
	s := a.Snapshot()
	if v := mustSample(t, s, "cupti_activity_dropped_records_total", "queue_full").Value; v != 5001 {
		t.Errorf("queue_full %g, want 5001", v)
	}
	for _, r := range invalidReasons {
		if v := mustSample(t, s, "cupti_activity_invalid_reports_total", r).Value; v != 0 {
			t.Errorf("%s %g, want 0", r, v)
		}
	}
}

func TestAddSat(t *testing.T) {
	if got := addSat(math.MaxUint64-1, 5); got != math.MaxUint64 {
		t.Errorf("addSat saturates: %d", got)
	}
	if got := addSat(2, 3); got != 5 {
		t.Errorf("addSat(2, 3) = %d", got)
	}
}
