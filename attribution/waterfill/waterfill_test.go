package waterfill

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

// TestFill: on random items (some without a share, some far over their limit) the capped
// split places exactly x, keeps every item within its limit, and leaves the items below their
// limit in proportion to their shares; the capping rounds and the sorted fill agree.
func TestFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for c := range 2000 {
		n := int32(1 + rng.IntN(40))
		var part, limit []float64
		var room float64
		for range n {
			w := float64(1 + rng.IntN(1_000_000))
			room += w / 1e9
			limit = append(limit, w/1e9)
			share := 0.0
			if rng.IntN(5) > 0 {
				share = math.Exp(10 * rng.Float64()) // shares over four orders of magnitude
			}
			part = append(part, share)
		}
		x := room * rng.Float64()
		orig := slices.Clone(part)
		var sorted Filler
		sortedPart := slices.Clone(orig)
		for j := range n {
			sorted.order = append(sorted.order, j)
		}
		leftSorted := sorted.fillSorted(x, sortedPart, limit)
		var f Filler
		left := f.Fill(x, part, limit)
		var placed float64
		for j := range n {
			placed += part[j]
			if part[j] > limit[j]*(1+1e-12) {
				t.Fatalf("case %d: item %d got %g over its limit %g", c, j, part[j], limit[j])
			}
			if !near(part[j], sortedPart[j], 1e-9) {
				t.Fatalf("case %d: item %d: rounds %g, sorted %g", c, j, part[j], sortedPart[j])
			}
		}
		if !near(placed+left, x, 1e-9) || !near(left, leftSorted, 1e-9) {
			t.Fatalf("case %d: placed %g + left %g (sorted: %g), want %g", c, placed, left, leftSorted, x)
		}
		// Below their limits the items keep their shares' proportions.
		var ratio float64
		for j := range n {
			if orig[j] > 0 && part[j] < limit[j]*(1-1e-9) {
				if r := part[j] / orig[j]; ratio == 0 {
					ratio = r
				} else if !near(r, ratio, 1e-9) {
					t.Fatalf("case %d: uncapped items scaled by %g and %g", c, ratio, r)
				}
			}
		}
	}
}

// TestFillNoAllocs: a Filler that has seen as many items allocates nothing, in the capping
// rounds or the sorted fill (TestFill's cases reach both): it runs for every sample and ratio
// metric of the join.
func TestFillNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var parts, limits [][]float64
	var xs []float64
	for range 500 {
		n := 1 + rng.IntN(40)
		part, limit := make([]float64, n), make([]float64, n)
		var room float64
		for j := range n {
			limit[j] = float64(1+rng.IntN(1_000_000)) / 1e9
			room += limit[j]
			if rng.IntN(5) > 0 {
				part[j] = math.Exp(10 * rng.Float64())
			}
		}
		parts, limits, xs = append(parts, part), append(limits, limit), append(xs, room*rng.Float64())
	}
	var f Filler
	part := make([]float64, 40)
	run := func() {
		for c := range parts {
			f.Fill(xs[c], part[:copy(part, parts[c])], limits[c])
		}
	}
	run() // f.order grows to the most items once
	if allocs := testing.AllocsPerRun(20, run); allocs != 0 {
		t.Errorf("Fill allocated %v times per 500 calls, want 0", allocs)
	}
}
