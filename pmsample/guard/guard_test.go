package guard

import (
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

const (
	guardSM   = "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	guardPCIe = "PCI.TriageCompute.pcie__read_bytes.sum"
	guardDRAM = "dram__bytes_read.sum"
	guardNVL  = "nvltx__bytes.sum"
	guardRate = "dram__bytes_read.sum.per_second"
	guardInst = "sm__inst_executed.sum"
)

func TestGuardCheck(t *testing.T) {
	metrics := []string{guardSM, guardPCIe, guardDRAM, guardNVL, guardRate, guardInst}
	g := New("GH100", metrics)
	const ms = uint64(time.Millisecond)
	ok := func() []float64 { return []float64{50, 1e6, 1e9, 1e8, 3e12, 1e9} }
	cases := []struct {
		name       string
		start, end uint64
		edit       func(v []float64)
		want       int // -1: delivered, else the failed check's index (6: the span)
	}{
		{"plausible", 0, ms, nil, -1},
		{"ratio at 100 %", 0, ms, func(v []float64) { v[0] = 100 }, -1},
		{"ratio rounding above 100 % is clamped", 0, ms, func(v []float64) { v[0] = 100.6 }, -1},
		{"ratio rounding below 0 is clamped", 0, ms, func(v []float64) { v[0] = -0.4 }, -1},
		{"ratio of 106,300 % (seen on an H100)", 0, ms, func(v []float64) { v[0] = 106300 }, 0},
		{"ratio of 287 %", 0, ms, func(v []float64) { v[0] = 287 }, 0},
		{"ratio of 101.5 %", 0, ms, func(v []float64) { v[0] = 101.5 }, 0},
		{"negative counter", 0, ms, func(v []float64) { v[5] = -1 }, 5},
		// GH100 PCIe Gen5: 64 GB/s, so at most 70.4 MB in 1 ms
		{"PCIe bytes at the link's peak", 0, ms, func(v []float64) { v[1] = 64e6 }, -1},
		{"PCIe bytes of 1 s in 1 ms", 0, ms, func(v []float64) { v[1] = 64e9 }, 1},
		// H200 4.8 TB/s: 4.8 GB in 1 ms is possible, 10 GB is not
		{"DRAM bytes at the peak", 0, ms, func(v []float64) { v[2] = 4.8e9 }, -1},
		{"DRAM bytes twice the peak", 0, ms, func(v []float64) { v[2] = 10e9 }, 2},
		{"DRAM bytes of a longer span", 0, 3 * ms, func(v []float64) { v[2] = 10e9 }, -1},
		{"NVLink above 450 GB/s", 0, ms, func(v []float64) { v[3] = 600e6 }, 3},
		{"DRAM rate above the peak", 0, ms, func(v []float64) { v[4] = 6e12 }, 4},
		{"span of 16 intervals", 0, 16 * ms, nil, -1},
		{"span of 1.13 s at 1 ms", 0, 1130 * ms, nil, 6},
		{"span of 50 µs at 1 ms", 0, ms / 20, nil, 6},
		{"no span", ms, ms, nil, 6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := ok()
			if c.edit != nil {
				c.edit(v)
			}
			got := g.Check(c.start, c.end, time.Millisecond, v)
			if got != c.want {
				t.Fatalf("Check = %d (%s), want %d", got, Failed(metrics, got), c.want)
			}
			if got < 0 && (v[0] < 0 || v[0] > 100) {
				t.Errorf("a delivered ratio is %v, outside [0, 100]", v[0])
			}
		})
	}
}

func TestGuardChipBounds(t *testing.T) {
	const ms = uint64(time.Millisecond)
	// 2 GB in 1 ms is 2 TB/s: an A100's peak, impossible on an L40S (864 GB/s), possible on a
	// chip the table does not know.
	for chip, want := range map[string]int{"GA100": -1, "AD102": 0, "GH100": -1, "XX999": -1, "": -1} {
		if got := New(chip, []string{guardDRAM}).Check(0, ms, time.Millisecond, []float64{2e9}); got != want {
			t.Errorf("%s: Check = %d, want %d", chip, got, want)
		}
	}
	// NVLink bytes on a chip without NVLink are impossible; zero is fine.
	g := New("AD102", []string{guardNVL})
	if got := g.Check(0, ms, time.Millisecond, []float64{1e6}); got != 0 {
		t.Errorf("AD102 NVLink bytes: Check = %d, want 0", got)
	}
	if got := g.Check(0, ms, time.Millisecond, []float64{0}); got != -1 {
		t.Errorf("AD102 no NVLink bytes: Check = %d, want -1", got)
	}
}

func TestGuardUnknownInterval(t *testing.T) {
	g := New("GH100", []string{guardSM})
	if got := g.Check(0, uint64(10*time.Second), 0, []float64{50}); got != -1 {
		t.Errorf("an old recording without the interval: Check = %d, want -1", got)
	}
}

func TestGuardScreen(t *testing.T) {
	const ms = uint64(time.Millisecond)
	metrics := []string{guardSM, guardPCIe}
	shared := []pmdata.Sample{
		{Start: 0, End: ms, Values: []float64{40, 1}},
		{Start: ms, End: 2 * ms, Values: []float64{38500, 1}}, // a ratio of 385
		{Start: 2 * ms, End: 3 * ms, Values: []float64{100.2, 1}},
		{Start: 3 * ms, End: 4 * ms, Values: []float64{10, 2e9}}, // 2 GB over PCIe in 1 ms
		{Start: 4 * ms, End: 5 * ms, Values: []float64{20, 1}},
	}
	b := pmdata.Batch{Metrics: metrics, Samples: shared, Interval: time.Millisecond}
	New("GH100", metrics).Screen(&b)
	if len(b.Samples) != 3 || b.Samples[0].Start != 0 || b.Samples[1].Start != 2*ms || b.Samples[2].Start != 4*ms {
		t.Fatalf("kept %+v, want the samples at 0, 2 and 4 ms", b.Samples)
	}
	if b.Samples[1].Values[0] != 100 {
		t.Errorf("rounding not clamped: %v", b.Samples[1].Values[0])
	}
	if b.Rejected[guardSM] != 1 || b.Rejected[guardPCIe] != 1 || b.RejectedCount() != 2 {
		t.Errorf("Rejected = %v, want one for each metric", b.Rejected)
	}
	if len(b.Lost) != 2 || b.Lost[0].Reason != "out_of_range" || b.Lost[0].Start != ms || b.Lost[0].Samples != 1 {
		t.Errorf("Lost = %+v, want two 1-sample out_of_range losses", b.Lost)
	}
	if shared[1].Start != ms || len(shared) != 5 {
		t.Error("Screen edited the reader's samples")
	}
}
