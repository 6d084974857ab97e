package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
)

// cutStat is one traced kernel class's (pod:kernel) records, and those another pod's turn cut.
type cutStat struct {
	n, nCut    int
	secs, sCut float64
}

// cuts prints, for each traced kernel class (pod:kernel) of the recording's first device, how
// many of its records and how much of their time another pod's turn cut: another pod's
// record starts or ends inside the record's span, so its kernel was switched out for part of
// it (-cuts; docs/attribution.md, "Records cut by another's turn"). Only traced pods' records
// are seen, so an untraced process's turns cut nothing here.
func cuts(path string, w io.Writer) error {
	type edge struct {
		t   uint64
		pod string
	}
	recs, err := firstDeviceKernels(path)
	if err != nil {
		return err
	}
	edges := make([]edge, 0, 2*len(recs))
	for _, r := range recs {
		edges = append(edges, edge{r.start, r.pod}, edge{r.end, r.pod})
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].t < edges[j].t })
	// other[i]: the first edge at or after i of another pod than edge i's
	other := make([]int, len(edges)+1)
	other[len(edges)] = len(edges)
	for i := len(edges) - 1; i >= 0; i-- {
		other[i] = other[i+1]
		if i+1 < len(edges) && edges[i+1].pod != edges[i].pod {
			other[i] = i + 1
		}
	}
	byClass := map[string]*cutStat{}
	for _, r := range recs {
		i := sort.Search(len(edges), func(i int) bool { return edges[i].t > r.start })
		if i < len(edges) && edges[i].pod == r.pod {
			i = other[i]
		}
		s := byClass[r.class]
		if s == nil {
			s = &cutStat{}
			byClass[r.class] = s
		}
		d := float64(r.end-r.start) / 1e9
		s.n++
		s.secs += d
		if i < len(edges) && edges[i].t < r.end {
			s.nCut++
			s.sCut += d
		}
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "records\tcut\tseconds\tcut seconds\ttraced kernel class")
	for _, k := range slices.Sorted(maps.Keys(byClass)) {
		s := byClass[k]
		fmt.Fprintf(bw, "%d\t%d\t%.4f\t%.4f\t%s\n", s.n, s.nCut, s.secs, s.sCut, k)
	}
	return bw.Flush()
}
