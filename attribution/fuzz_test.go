package attribution

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// FuzzAttributor reads operations from the input (connect, disconnect, records, coverage,
// batches, clock jumps) with arbitrary times, devices and values: no input may panic, and
// after a final Flush the attributed PCIe bytes of each device equal its attributed total.
func FuzzAttributor(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 10, 2, 3, 0, 0, 0, 0, 0, 0, 0, 1, 4, 1})
	f.Add([]byte{0, 1, 3, 2, 4, 0, 255, 255, 255, 255, 255, 255, 255, 255, 2, 2, 0, 0, 0, 0, 9, 0, 0, 0, 5})
	f.Add(turnsSeed())
	f.Fuzz(func(t *testing.T, in []byte) { fuzzBody(t)(in) })
}

// turnsSeed is an input in which two processes on GPU 0 take 2 ms turns with a 0.2 ms switch
// between them, in 1 ms samples that count the switches (batches with arg&8): it reaches the
// turns and the split of switch samples.
func turnsSeed() []byte {
	var b []byte
	le := func(v uint64, n int) []byte {
		var x [8]byte
		binary.LittleEndian.PutUint64(x[:], v)
		return x[:n]
	}
	op := func(o, arg byte, rest ...[]byte) {
		b = append(b, o, arg)
		for _, r := range rest {
			b = append(b, r...)
		}
	}
	at := func(us uint64) []byte { return le(us, 3) } // an even value: t0 + us µs
	op(0, 0)                                          // pod p, GPU 0: procs[0]
	op(0, 1)                                          // procs[1]
	op(3, 0, at(0), le(65535, 2))                     // coverage of procs[0], 65 ms
	op(3, 4, at(0), le(65535, 2))                     // of procs[1]
	for i := range uint64(16) {
		op(2, byte(4*(i%2)), at(i*2200), le(2005, 2)) // a 2 ms kernel on device 0, by turns
	}
	for batch := range uint64(6) {
		var smp [][]byte
		for k := batch * 6; k < batch*6+6; k++ {
			cycles := 0
			if sw := (k*1000 + 2200 - 2000) % 2200; sw < 1200 && k*1000 >= 2000 { // [2000+2200i, 2200+2200i) µs in [k, k+1) ms
				cycles = 50
			}
			smp = append(smp, le(10000, 2), le(1000, 2), []byte{byte(cycles), 100})
		}
		op(4, 40, append([][]byte{at(batch * 6000)}, smp...)...) // device 0, 6 samples, with switches
	}
	op(5, 30)
	return b
}

// fuzzBody is the body of FuzzAttributor.
func fuzzBody(t *testing.T) func(in []byte) {
	return func(in []byte) {
		a, clk := newTest(t, WithSeriesTTL(1<<62)) // the clock jumps: keep every series
		procs := make([]*record.Process, 3)
		next := func(n int) uint64 { // n bytes as a little-endian number
			var b [8]byte
			k := copy(b[:n], in)
			in = in[k:]
			return binary.LittleEndian.Uint64(b[:])
		}
		tm := func() uint64 { // a time near t0, or anything
			v := next(3)
			if v&1 == 1 {
				return next(8)
			}
			return uint64(t0) + v*1000
		}
		for len(in) > 0 {
			op, arg := next(1), int(next(1))
			p := procs[arg%3]
			switch op % 6 {
			case 0:
				if p == nil {
					p = &record.Process{PID: uint32(arg)}
					procs[arg%3] = p
				}
				a.ProcessConnected(p, activity.ProcessInfo{Pod: "p", GPUs: []string{"0", "1", "9"}[:1+arg%3]})
			case 1:
				if p != nil {
					a.ProcessDisconnected(p)
				}
			case 2:
				if p == nil {
					p = &record.Process{PID: 99}
				}
				s := tm()
				a.Records(p, []record.Record{{Kind: record.Kind(1 + arg%4), Device: uint32(arg % 4), Name: string(rune('a' + arg%5)), Start: s, End: s + next(2)*1000 - 5000}})
			case 3:
				if p == nil {
					p = &record.Process{PID: 98}
				}
				s := tm()
				a.Coverage(p, []record.Interval{{Start: s, End: s + next(2)*1000 - 100_000, Lossy: arg&1 == 1}})
			case 4:
				dev := arg % 2
				s := tm()
				n := 1 + arg%7
				var ss []pmdata.Sample
				metrics := testMetrics
				if arg&8 != 0 { // with the context-switch counter: the turns and their switch samples
					metrics = append(slices.Clip(testMetrics), switchMetric, grActive)
				}
				for i := range n {
					l := next(2) * 100
					v := float64(next(2))
					if i == 3 {
						v = math.NaN()
					}
					vals := []float64{float64(arg), v}
					if len(metrics) > len(testMetrics) {
						vals = append(vals, float64(next(1))*4000, float64(next(1)%101))
					}
					ss = append(ss, pmdata.Sample{Start: s, End: s + l, Values: vals})
					s += l
				}
				a.Add(pmdata.Batch{Device: dev, Metrics: metrics, Samples: ss})
			case 5:
				clk.advance(1 << (arg % 40))
			}
		}
		a.Flush()
		snap := a.Snapshot()
		a.mu.Lock()
		defer a.mu.Unlock()
		for dev := range 2 {
			got := 0.0
			if d := a.devs[dev]; len(d.total) > 1 {
				got = d.total[1]
			}
			if attributed := sum(snap, "cupti_kernel_pcie_bytes_total", []string{"0", "1"}[dev]); !near(attributed, got, 1e-9) {
				t.Fatalf("gpu %d: attributed %v, device total %v", dev, attributed, got)
			}
		}
	}
}
