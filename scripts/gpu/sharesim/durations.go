package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
)

// durations prints, for each traced kernel class (pod:kernel) of the recording's first device,
// the durations of its records that overlapped no other pod's record and of those that did:
// count and 10th, 50th and 90th percentiles in µs (-durations; docs/attribution.md, "Why MPS
// clients cannot be told apart under saturation"). Under MPS a kernel beside another client's
// runs longer, but how much longer says nothing of its bytes where the class's own sizes vary
// as much. Only traced pods' records are seen.
func durations(path string, w io.Writer) error {
	recs, err := firstDeviceKernels(path)
	if err != nil {
		return err
	}
	beside := overlapOthers(recs)
	alone, shared := map[string][]float64{}, map[string][]float64{}
	for i, r := range recs {
		d := float64(r.end-r.start) / 1e3
		if beside[i] {
			shared[r.class] = append(shared[r.class], d)
		} else {
			alone[r.class] = append(alone[r.class], d)
		}
	}
	classes := slices.Sorted(maps.Keys(alone))
	for c := range shared {
		if _, ok := alone[c]; !ok {
			classes = append(classes, c)
		}
	}
	slices.Sort(classes)
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "alone\tp10\tp50\tp90\tbeside\tp10\tp50\tp90\tclass (µs; beside: overlapping another pod's record)")
	for _, c := range classes {
		a, s := alone[c], shared[c]
		fmt.Fprintf(bw, "%d\t%s\t%d\t%s\t%s\n", len(a), quantiles(a), len(s), quantiles(s), c)
	}
	return bw.Flush()
}

// overlapOthers reports for each record whether another pod's record overlaps its span: one
// that started before it and ends after its start (a sweep forward, by start), or one that
// starts at or after its start and before its end (a sweep backward). Linear in the records
// times the pods.
func overlapOthers(recs []podRec) []bool {
	order := make([]int, len(recs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(recs[i].start, recs[j].start) })
	out := make([]bool, len(recs))
	maxEnd := map[string]uint64{} // each pod's latest end among the records started so far
	for _, i := range order {
		r := recs[i]
		for pod, e := range maxEnd {
			out[i] = out[i] || pod != r.pod && e > r.start
		}
		maxEnd[r.pod] = max(maxEnd[r.pod], r.end)
	}
	minStart := map[string]uint64{} // each pod's earliest start among the records after
	for k := len(order) - 1; k >= 0; k-- {
		r := recs[order[k]]
		for pod, s := range minStart {
			out[order[k]] = out[order[k]] || pod != r.pod && s < r.end
		}
		if s, ok := minStart[r.pod]; !ok || r.start < s {
			minStart[r.pod] = r.start
		}
	}
	return out
}

// quantiles formats the 10th, 50th and 90th percentiles of x (sorted in place), "-" for none.
func quantiles(x []float64) string {
	if len(x) == 0 {
		return "-\t-\t-"
	}
	slices.Sort(x)
	q := func(p float64) float64 { return x[int(p*float64(len(x)-1))] }
	return fmt.Sprintf("%.0f\t%.0f\t%.0f", q(0.1), q(0.5), q(0.9))
}
