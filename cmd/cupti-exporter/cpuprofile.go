//go:build cpuprofile

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// A build for the GPU stages only (`go build -tags cpuprofile`, scripts/gpu/prepare.sh): with
// CUPTI_EXPORTER_CPUPROFILE=FILE,DELAY,SECONDS[,HZ] the process writes a CPU profile of SECONDS
// (Go duration) starting DELAY after it starts, at HZ samples a second of CPU (default 100: a
// process at a fifth of a core gives too few samples to split what lies outside its CUPTI
// calls), and beside it FILE.allocs0 and FILE.allocs1 (the allocation profile at the window's
// start and end: `go tool pprof -base FILE.allocs0 FILE.allocs1` is what the window allocated)
// and FILE.memstats (the window's allocation and collector figures). Release builds have no
// such variable.
func init() {
	spec := os.Getenv("CUPTI_EXPORTER_CPUPROFILE")
	if spec == "" {
		return
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 && len(parts) != 4 {
		return
	}
	hz := 0
	if len(parts) == 4 {
		if n, err := strconv.Atoi(parts[3]); err == nil && n > 0 {
			hz = n
		}
	}
	delay, err1 := time.ParseDuration(parts[1])
	length, err2 := time.ParseDuration(parts[2])
	if err1 != nil || err2 != nil {
		return
	}
	go func() {
		time.Sleep(delay)
		f, err := os.Create(parts[0])
		if err != nil {
			return
		}
		if hz > 0 {
			// set before StartCPUProfile, which then keeps it (and says so on stderr); the
			// profile still states 100 Hz, so its times read HZ/100 too long, its shares right
			runtime.SetCPUProfileRate(hz)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return
		}
		var m0, m1 runtime.MemStats
		writeAllocs(parts[0] + ".allocs0")
		runtime.ReadMemStats(&m0)
		time.Sleep(length)
		runtime.ReadMemStats(&m1)
		writeAllocs(parts[0] + ".allocs1")
		pprof.StopCPUProfile()
		f.Close()
		secs := length.Seconds()
		_ = os.WriteFile(parts[0]+".memstats", []byte(fmt.Sprintf(
			"window %.1f s: allocated %.0f B/s in %.0f objects/s; %d collections (%.2f /s), collector CPU fraction since start %.4f; heap in use %d -> %d B, next GC at %d B, GOGC default\n",
			secs, float64(m1.TotalAlloc-m0.TotalAlloc)/secs, float64(m1.Mallocs-m0.Mallocs)/secs, m1.NumGC-m0.NumGC,
			float64(m1.NumGC-m0.NumGC)/secs, m1.GCCPUFraction, m0.HeapAlloc, m1.HeapAlloc, m1.NextGC)), 0o644)
	}()
}

func writeAllocs(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
}
