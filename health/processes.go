package health

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
)

// mpsServerCommand is the MPS server's executable (the control daemon,
// nvidia-cuda-mps-control, starts it; its comm is truncated to "nvidia-cuda-mps" like the
// daemon's, so the command line tells them apart).
const mpsServerCommand = "nvidia-cuda-mps-server"

// maxCmdlineBytes bounds the read of /proc/<pid>/cmdline: argv[0] is all that is used.
const maxCmdlineBytes = 4096

// isMPSServer reports whether pid runs the MPS server, by argv[0] of its command line under
// procRoot (the host's /proc: the exporter needs the host's PID namespace, as for pods).
// An unreadable or vanished process is not the server.
func isMPSServer(procRoot string, pid uint32) bool {
	f, err := os.Open(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cmdline"))
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCmdlineBytes))
	if err != nil {
		return false
	}
	arg0, _, _ := bytes.Cut(b, []byte{0})
	return filepath.Base(string(arg0)) == mpsServerCommand
}

// maxObservedProcesses bounds the processes reported per GPU and collection (NVML's lists
// are sized by the driver, not by us).
const maxObservedProcesses = 256

// observeProcesses reads the per-process SM utilisation since the last collection into
// procs (the running list of this collection) and hands the result to the listener.
func (g *gpuState) observeProcesses(procs []gpuprocs.Process, now time.Time, interval time.Duration, listen ProcessListener) {
	start := g.lastProcs
	if start.IsZero() || now.Sub(start) > 10*interval { // first collection, or after a long gap
		start = now.Add(-interval)
	}
	g.lastProcs = now
	if len(procs) > maxObservedProcesses {
		procs = procs[:maxObservedProcesses]
	}
	// With one process at most, now and at the read before, and none under MPS, the join
	// has no shares to split by (a lone untraced process's time is the graphics engine's
	// active time in each sample, attribution/processes.go), and the per-process utilisation
	// is NVML health's dearest call: 2.1 ms of CPU a read on an H100 (docs/performance.md).
	lone := len(procs) <= 1 && g.lastListed <= 1 && !slices.ContainsFunc(procs, func(p gpuprocs.Process) bool { return p.MPS != "" })
	g.lastListed = len(procs)
	var shares map[uint32]float64
	if lone {
		g.utilSkipped = true
	} else {
		shares = g.readShares(interval)
	}
	if shares != nil {
		for i := range procs {
			procs[i].SMShare = shares[procs[i].PID] // 0: no sample, it did not run
			delete(shares, procs[i].PID)
		}
		for pid, s := range shares { // ran, but not listed (exited since, or not a compute process)
			if s > 0 && len(procs) < maxObservedProcesses {
				procs = append(procs, gpuprocs.Process{PID: pid, SMShare: s})
			}
		}
	}
	listen.ObserveProcesses(gpuprocs.Observation{GPU: g.gpu, UUID: g.uuid, Start: start, End: now, Shares: shares != nil, MIG: g.migOn, Processes: procs})
}

// readShares returns each process's mean SM utilisation (0..1) over the samples NVML took
// since the last read, or nil when the driver gives none (not supported, or an error). The
// first read, and the first after reads were skipped, take the last interval's samples only
// (NVML keeps older ones), measured back from the newest sample on NVML's own clock.
func (g *gpuState) readShares(interval time.Duration) map[uint32]float64 {
	if g.skip("process_utilization") {
		return nil
	}
	samples, ret := g.dev.GetProcessUtilization(g.lastUtilTS)
	fresh := g.lastUtilTS == 0 || g.utilSkipped
	g.utilSkipped = false
	switch {
	case ret == nvml.ERROR_NOT_FOUND: // no process ran since the last read
		return map[uint32]float64{}
	case !g.ok("process_utilization", ret):
		return nil
	}
	from := g.lastUtilTS
	if fresh {
		var newest uint64
		for _, s := range samples {
			newest = max(newest, s.TimeStamp)
		}
		from = newest - min(newest, uint64(interval.Microseconds()))
	}
	sum := map[uint32]float64{}
	n := map[uint32]int{}
	for _, s := range samples {
		if s.TimeStamp <= from && from != 0 {
			continue
		}
		sum[s.Pid] += math.Min(float64(s.SmUtil), 100) / 100
		n[s.Pid]++
	}
	for _, s := range samples {
		g.lastUtilTS = max(g.lastUtilTS, s.TimeStamp)
	}
	for pid, c := range n {
		sum[pid] /= float64(c)
	}
	return sum
}
