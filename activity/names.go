package activity

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/kernelname"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// maxKernelNameLen bounds the length of a shortened kernel name in bytes.
const maxKernelNameLen = kernelname.MaxLen

// ShortKernelName turns a kernel name as CUPTI reports it (usually an Itanium-mangled C++
// name) into a short, readable label value (kernelname.Short):
//
//   - the name is demangled without function parameters (_Z4busyPfii -> busy);
//   - template arguments are kept one level deep only, and anything nested inside them
//     (templates, parameter lists) is dropped, so
//     cutlass::Kernel<cutlass::gemm::kernel::Gemm<...>> becomes
//     cutlass::Kernel<cutlass::gemm::kernel::Gemm>;
//   - parameter lists of enclosing functions are dropped ({lambda(int)#1} -> {lambda#1});
//   - control characters and invalid UTF-8 become '?';
//   - the result is cut to 120 bytes, ending in "...".
//
// Names that are not mangled (e.g. cuBLAS's ampere_sgemm_128x64_nn) keep their text,
// bounded the same way; so do mangled names over 1 KiB and those whose shape would make
// the demangler's work grow faster than their length (kernelname's check). Only the first
// 4 KiB of a name are read. An empty name becomes "unknown".
func ShortKernelName(mangled string) string {
	s, _ := kernelname.Short(mangled)
	return s
}

// Demangling CPU time the Aggregator may spend, all connections together: a burst of 250 ms
// (about 10,000 realistic names at 20 µs each), then 25 ms per second (2.5% of a core). Past
// it, new names are shortened as text until the budget refills
// (cupti_activity_kernel_names_not_demangled_total{reason="budget"}).
const (
	demangleBurst = 250 * time.Millisecond
	demangleRate  = 25 * time.Millisecond
)

// maxCachedNames bounds the shortened names a nameCache keeps (about 200 bytes each: the
// key is a hash, never the mangled name).
const maxCachedNames = 2 * maxTrackedNames

// nameCache remembers the short names of mangled names, so that each is shortened once and
// never under the Aggregator's lock: the connection's goroutine shortens new names before
// it takes the lock. Keys are seeded hashes, so a hostile name cannot be made to collide
// with another. Demangling is bounded by a budget of CPU time shared by all connections,
// and names not demangled are counted by reason. Safe for concurrent use.
type nameCache struct {
	seed   maphash.Seed
	budget *kernelname.Budget
	mu     sync.Mutex
	m      map[uint64]kernelName

	notDemangled []atomic.Uint64 // by index in kernelname.Reasons
}

func newNameCache() *nameCache {
	return &nameCache{
		seed: maphash.MakeSeed(), budget: kernelname.NewBudget(demangleBurst, demangleRate), m: make(map[uint64]kernelName),
		notDemangled: make([]atomic.Uint64, len(kernelname.Reasons)),
	}
}

// kernelName is what the Aggregator knows of a kernel name: its short name, and its class
// for the per-pod time split (a collective of the table in collective.go, or compute). The
// zero value is a kernel the name table had no room for: no short name, compute.
type kernelName struct {
	short string
	class workClass
}

// name returns the short name and class of mangled, computing them without holding any
// lock when they are not cached. When full the cache starts over. A name shortened as text
// because the budget was spent is not cached: it is demangled once the budget allows.
func (c *nameCache) name(mangled string) kernelName {
	k := maphash.String(c.seed, mangled)
	c.mu.Lock()
	n, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return n
	}
	s, reason := c.budget.Short(mangled)
	if i := slices.Index(kernelname.Reasons, reason); i >= 0 {
		c.notDemangled[i].Add(1)
	}
	n = kernelName{short: s}
	if CollectiveLibrary(s) != "" {
		n.class = classComm
	}
	if reason == kernelname.OverBudget {
		return n
	}
	c.mu.Lock()
	if len(c.m) >= maxCachedNames {
		clear(c.m)
	}
	c.m[k] = n
	c.mu.Unlock()
	return n
}

// notDemangledFamily is cupti_activity_kernel_names_not_demangled_total.
func (c *nameCache) notDemangledFamily(start time.Time) snapshot.Family {
	f := snapshot.Family{Desc: namesNotDemangledDesc}
	for i, r := range kernelname.Reasons {
		f.Samples = append(f.Samples, snapshot.Sample{LabelValues: []string{r}, Value: float64(c.notDemangled[i].Load()), Start: start})
	}
	return f
}
