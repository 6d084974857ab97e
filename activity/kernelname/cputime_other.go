//go:build !linux

package kernelname

import "time"

// threadCPUTime runs f and returns the wall time it took (no thread CPU clock here).
func threadCPUTime(f func()) time.Duration {
	start := time.Now()
	f()
	return time.Since(start)
}
