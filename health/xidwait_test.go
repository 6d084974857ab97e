package health

import (
	"testing"
	"time"
)

// TestXIDWaitEndsOnTheTimetable: a wait on the XID event set ends just past a multiple of
// 500 ms (where the decodes and the other loops wake, internal/tick), never later than 501 ms.
func TestXIDWaitEndsOnTheTimetable(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		at   time.Duration
		want uint32
	}{{0, 501}, {30 * time.Millisecond, 471}, {499*time.Millisecond + 500*time.Microsecond, 1}, {740 * time.Millisecond, 261}} {
		if got := xidWaitMS(base.Add(tc.at)); got != tc.want {
			t.Errorf("at +%v: wait %d ms, want %d", tc.at, got, tc.want)
		}
	}
}
