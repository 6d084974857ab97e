//go:build cpuprofile

package main

import (
	"os"
	"runtime/pprof"
	"strings"
	"time"
)

// A build for the GPU stages only (`go build -tags cpuprofile`, scripts/gpu/prepare.sh): with
// CUPTI_EXPORTER_CPUPROFILE=FILE,DELAY,SECONDS the process writes a CPU profile of SECONDS
// (Go duration) starting DELAY after it starts. Release builds have no such variable.
func init() {
	spec := os.Getenv("CUPTI_EXPORTER_CPUPROFILE")
	if spec == "" {
		return
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 3 {
		return
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
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return
		}
		time.Sleep(length)
		pprof.StopCPUProfile()
		f.Close()
	}()
}
