// Package waterfill shares a quantity over items in proportion to their shares, none above
// its own limit (water filling): an item that would go over its limit gets its limit, and what
// it could not take goes to the others, still in proportion to their shares.
//
// The attribution join uses it to bound a ratio's active seconds per item (an item cannot be
// active longer than it ran); it runs for every sample and ratio metric, so a [Filler] keeps
// its buffer from call to call and the caller owns the shares and the limits.
package waterfill

import (
	"cmp"
	"slices"
)

// maxRounds is how many capping rounds Fill runs before it sorts: a round is linear and most
// samples need one or two, but a sample could need one per item (up to 8,192).
const maxRounds = 8

// Filler shares quantities over items. The zero value is ready; it allocates only when a
// call has more items than any before.
type Filler struct {
	order []int32 // the items not yet at their limit
}

// Fill shares x over the items of part in proportion to part, none above its limit (limit[j],
// +Inf for none): it overwrites part with the shares and returns what it could not place
// (more than 0 only when every item with a part is at its limit). Items with a part of 0
// get nothing.
func (f *Filler) Fill(x float64, part, limit []float64) float64 {
	f.order = f.order[:0]
	shares := 0.0
	for j := range part {
		f.order = append(f.order, int32(j))
		shares += part[j]
	}
	left := x
	// Cap the items over their limit at the current scale and share what is left among the
	// others, until none is over: capping one only raises the others' scale, so an item over
	// its limit stays over.
	for round := 0; len(f.order) > 0 && shares > 0; round++ {
		if round == maxRounds {
			return f.fillSorted(left, part, limit)
		}
		scale := left / shares
		k := 0
		for _, j := range f.order {
			if l := limit[j]; part[j]*scale > l {
				left -= l
				part[j] = l
				continue
			}
			f.order[k] = j
			k++
		}
		if k == len(f.order) { // none capped: the rest fit at this scale
			for _, j := range f.order {
				part[j] *= scale
			}
			return 0
		}
		f.order = f.order[:k]
		shares = 0 // summed again, not subtracted: no rounding residue when only zero parts are left
		for _, j := range f.order {
			shares += part[j]
		}
	}
	return left
}

// fillSorted ends Fill in O(k log k) for the k items left in f.order: by limit / part, the
// items that fill first come first; each fills, or it and all after it fit at the scale of
// what is left.
func (f *Filler) fillSorted(left float64, part, limit []float64) float64 {
	slices.SortFunc(f.order, func(p, q int32) int {
		return cmp.Compare(limit[p]*part[q], limit[q]*part[p]) // limit/part, without dividing by 0
	})
	var shares float64
	for _, j := range f.order {
		shares += part[j]
	}
	for k, j := range f.order {
		if part[j] == 0 { // sorted last: no item with a share is left
			break
		}
		if scale := left / shares; part[j]*scale <= limit[j] {
			for _, r := range f.order[k:] {
				part[r] *= scale
			}
			return 0
		}
		shares -= part[j]
		left -= limit[j]
		part[j] = limit[j]
	}
	return left
}

// Bytes is the capacity of its buffer.
func (f *Filler) Bytes() int64 { return 4 * int64(cap(f.order)) }
