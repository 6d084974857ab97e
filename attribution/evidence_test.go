package attribution

import (
	"math"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
)

// TestTurnLikelihood checks turnSamples.Likelihood on one 1 ms sample beside a traced process
// whose one kernel class is known to read 3 TB/s alone, on a device whose highest read rate
// seen is 4 TB/s: a sample read at the class's rate favours the process's turn, one read at a
// fifth of it (a narrow reader's turn) disfavours it, each at most 5 to 1; an untraced
// process, a sample holding a switch and a class whose rate is not known yet say nothing.
func TestTurnLikelihood(t *testing.T) {
	const (
		ms    = 1_000_000
		rate  = 3e12 // the class's solo rate, bytes a second
		peak  = 4e12
		class = int32(firstNamedClass)
		pid   = 77
	)
	a := &Attributor{metrics: []*metric{
		{perfworks: "dram__bytes_read.sum", dramRead: true, q: quantityCount, scale: 1},
		{perfworks: "FE_A.TriageCompute.gpu__gr_cycles_active_cmd_ctxsw.sum", ctxsw: true},
	}}
	known := &classRate{e: 1, es: 1, a: []float64{rate}, as: []float64{rate}}
	d := &devState{carried: map[rateKey]*classRate{{class, pid}: known}}
	d.sc.off, d.sc.itemProc, d.sc.itemLC, d.sc.itemW = []int32{0, 1}, []int32{0}, []int32{0}, []float64{ms}
	d.sc.classes, d.sc.lpid = []int32{class}, []uint32{pid}
	traced := turns.Context{Key: turns.TracedKey(0, pid), Slot: 0, Class: -1}
	untraced := turns.Context{Key: turns.Key{Kind: turns.Untraced, ID: 9}, Slot: -1, Class: 9}
	like := func(readBytes, switchCycles float64, ctx turns.Context) float64 {
		ts := &turnSamples{a: a, d: d, chunk: []psample{{start: 0, end: ms, idx: []int32{0, 1}, vals: []float64{readBytes, switchCycles}}}}
		d.dramPeak = peak
		ts.readRates()
		return ts.Likelihood(0, ctx)
	}
	atRate := rate / 1000 // bytes in 1 ms
	want := peak / (math.Sqrt(2*math.Pi) * dramSpread * rate)
	if want <= 1 || want >= dramMaxOdds {
		t.Fatalf("the test's rates give %.3g at a match; want it between 1 and %g", want, dramMaxOdds)
	}
	for _, c := range []struct {
		name    string
		got, lo float64
		hi      float64
	}{
		{"read at its kernels' rate", like(atRate, 0, traced), want * 0.999, want * 1.001},
		{"read at a fifth of it", like(atRate/5, 0, traced), 1 / dramMaxOdds, 1 / dramMaxOdds},
		{"nothing read", like(0, 0, traced), 1 / dramMaxOdds, 1 / dramMaxOdds},
		{"an untraced process", like(atRate/5, 0, untraced), 1, 1},
		{"a switch sample", like(atRate/5, 220_000, traced), 1, 1},
	} {
		if c.got < c.lo || c.got > c.hi {
			t.Errorf("%s: likelihood %.4g, want %.4g-%.4g", c.name, c.got, c.lo, c.hi)
		}
	}
	known.es = knownSolo / 2 // too little solo time: the rate is not known yet
	if got := like(atRate/5, 0, traced); got != 1 {
		t.Errorf("a class whose rate is not known yet: likelihood %.4g, want 1", got)
	}
}
