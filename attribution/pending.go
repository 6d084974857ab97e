package attribution

// bucketShift sets the width of the time buckets of pending records: 2^26 ns, about 67 ms.
const bucketShift = 26

// pendingSet holds the records that no chunk has taken yet, in time buckets by start, so
// that a release touches only the records it takes (and one boundary bucket) instead of
// every record held for the watermark.
type pendingSet struct {
	buckets map[int64]*bucket
	n       int
	last    *bucket // the bucket of the previous add: records come in time order
	lastKey int64
	free    []*bucket
}

type bucket struct{ recs []rec }

func (p *pendingSet) len() int { return p.n }

func (p *pendingSet) add(r rec) {
	k := r.start >> bucketShift
	b := p.last
	if b == nil || k != p.lastKey {
		if p.buckets == nil {
			p.buckets = map[int64]*bucket{}
		}
		b = p.buckets[k]
		if b == nil {
			b = p.newBucket()
			p.buckets[k] = b
		}
		p.last, p.lastKey = b, k
	}
	b.recs = append(b.recs, r)
	p.n++
}

func (p *pendingSet) newBucket() *bucket {
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		return b
	}
	return &bucket{}
}

func (p *pendingSet) drop(k int64, b *bucket) {
	delete(p.buckets, k)
	b.recs = b.recs[:0]
	if len(p.free) < 64 {
		p.free = append(p.free, b)
	}
	if p.last == b {
		p.last = nil
	}
}

// take moves the records that start before t to dst.
func (p *pendingSet) take(dst []rec, t int64) []rec {
	for k, b := range p.buckets {
		switch {
		case (k+1)<<bucketShift <= t:
			dst = append(dst, b.recs...)
			p.n -= len(b.recs)
			p.drop(k, b)
		case k<<bucketShift < t:
			n := 0
			for _, r := range b.recs {
				if r.start < t {
					dst = append(dst, r)
					continue
				}
				b.recs[n] = r
				n++
			}
			p.n -= len(b.recs) - n
			b.recs = b.recs[:n]
		}
	}
	return dst
}

// prune removes the records that end by cut, calling gone for each.
func (p *pendingSet) prune(cut int64, gone func(rec)) int {
	removed := 0
	for k, b := range p.buckets {
		if k<<bucketShift >= cut {
			continue
		}
		before := len(b.recs)
		b.recs = keepAfter(b.recs, cut, gone)
		removed += before - len(b.recs)
		p.n -= before - len(b.recs)
		if len(b.recs) == 0 {
			p.drop(k, b)
		}
	}
	return removed
}

// keepAfter keeps, in place and in order, the records of recs that end after cut, and calls
// gone for each of the others.
func keepAfter(recs []rec, cut int64, gone func(rec)) []rec {
	n := 0
	for _, r := range recs {
		if r.end > cut {
			recs[n] = r
			n++
			continue
		}
		gone(r)
	}
	return recs[:n]
}
