package mapping

import "sort"

// Suggest returns up to n names from known nearest to name by edit distance (Levenshtein),
// nearest first, for "unknown metric" errors. Names further than half the length of name
// are left out: they are not what the user meant.
func Suggest(name string, known []string, n int) []string {
	if n <= 0 {
		return nil
	}
	type cand struct {
		s string
		d int
	}
	limit := len(name)/2 + 1
	var cs []cand
	for _, k := range known {
		if d := levenshtein(name, k, limit); d <= limit {
			cs = append(cs, cand{k, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].s < cs[j].s
	})
	var out []string
	for _, c := range cs {
		if len(out) == n {
			break
		}
		if len(out) > 0 && out[len(out)-1] == c.s {
			continue
		}
		out = append(out, c.s)
	}
	return out
}

// levenshtein returns the edit distance between a and b (bytes), or limit+1 once it is
// certain to exceed limit.
func levenshtein(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
