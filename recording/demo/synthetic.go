package demo

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// Synthetic recording shape: 60 s, 2 GH100 devices, one sample every 10 ms, one batch
// every 250 ms per device.
const (
	synthStart    = uint64(1795299120000000000) // 2026-11-21T22:52:00Z
	synthDuration = 60_000_000_000
	synthInterval = 10_000_000
	synthBatch    = 250_000_000
)

// Devices of the synthetic recording.
var synthDevices = []pmdata.Device{
	{Index: 0, UUID: "GPU-5d1f0c3a-7b2e-4c91-9a60-1f2e3d4c5b6a", Model: "NVIDIA H200", Chip: "GH100", PCIBusID: "0000:19:00.0"},
	{Index: 1, UUID: "GPU-8e2a4b6c-1d3f-4e5a-8b7c-9d0e1f2a3b4c", Model: "NVIDIA H200", Chip: "GH100", PCIBusID: "0000:3b:00.0"},
}

// phase is a stretch of the synthetic workload.
type phase struct {
	name  string
	until uint64 // ns since start
}

var phases = []phase{
	{"idle", 2e9}, {"matmul", 20e9}, {"copies", 35e9}, {"tiny kernels", 52e9}, {"idle", 60e9},
}

func phaseAt(t uint64) string {
	for _, p := range phases {
		if t < p.until {
			return p.name
		}
	}
	return "idle"
}

// level is the synthetic value of a curated metric (by its base name) in a phase: a
// percentage for ratios and throughputs, bytes per second for byte counters.
func level(base, ph string) float64 {
	type lv struct{ idle, matmul, copies, tiny float64 }
	table := map[string]lv{
		"gr__cycles_active":                      {0, 99, 40, 90},
		"sm__cycles_active":                      {0, 97, 5, 35},
		"tpc__warps_active_realtime":             {0, 45, 2, 8},
		"sm__pipe_tensor_cycles_active_realtime": {0, 88, 0, 0},
		"sm__pipe_fp64_cycles_active_realtime":   {0, 0, 0, 2},
		"sm__pipe_fma_cycles_active":             {0, 12, 1, 20},
		"sm__inst_executed_pipe_fma_type_fp16":   {0, 4, 0, 1},
		"dram__cycles_active":                    {0, 18, 65, 3},
		"pcie__read_bytes":                       {2e5, 1e8, 2.2e10, 5e7},
		"pcie__write_bytes":                      {2e5, 5e7, 1.1e10, 5e7},
		"nvlrx__bytes":                           {0, 0, 0, 0},
		"nvltx__bytes":                           {0, 0, 0, 0},
	}
	v := table[base]
	switch ph {
	case "matmul":
		return v.matmul
	case "copies":
		return v.copies
	case "tiny kernels":
		return v.tiny
	}
	return v.idle
}

// openSynthWriter starts a generated recording at synthStart: its header, devices and the
// catalog of the curated metrics (read from the GH100 catalog TSV), which it returns.
func openSynthWriter(w io.Writer, tsv string, h recording.Header, devices []pmdata.Device) (*recording.Writer, []string, error) {
	metrics, err := curatedMetrics()
	if err != nil {
		return nil, nil, err
	}
	catalog, err := loadCatalog(tsv, metrics)
	if err != nil {
		return nil, nil, err
	}
	rw, err := recording.NewWriter(w, h, synthStart)
	if err != nil {
		return nil, nil, err
	}
	if err := rw.WriteDevices(synthStart, devices); err != nil {
		return nil, nil, err
	}
	if err := rw.WriteCatalog(synthStart, catalog); err != nil {
		return nil, nil, err
	}
	return rw, metrics, nil
}

// loadCatalog reads the properties of the named metrics' base metrics from the GH100
// catalog TSV (metric_type, base_metric, hw_unit, dim_unit).
func loadCatalog(tsv string, metrics []string) ([]pmdata.CatalogEntry, error) {
	f, err := os.Open(tsv)
	if err != nil {
		return nil, fmt.Errorf("reading metric catalog: %w", err)
	}
	defer f.Close()
	props := map[string]pmdata.Properties{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 4 || strings.HasPrefix(cols[0], "#") {
			continue
		}
		p := pmdata.Properties{HWUnit: cols[2], DimUnit: cols[3]}
		switch cols[0] {
		case "ratio":
			p.Type = pmdata.TypeRatio
		case "throughput":
			p.Type = pmdata.TypeThroughput
		}
		props[cols[1]] = p
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metric catalog: %w", err)
	}
	var out []pmdata.CatalogEntry
	for _, m := range metrics {
		base := baseOf(m)
		p, ok := props[base]
		if !ok {
			return nil, fmt.Errorf("metric %s: base metric %s is not in %s", m, base, tsv)
		}
		out = append(out, pmdata.CatalogEntry{Name: m, Properties: p})
	}
	return out, nil
}

// Generate writes the synthetic demo recording to w. tsv is the path of the GH100
// PM-sampling catalog (testdata/gh100_pm_sampling_base_metrics.tsv). The output depends
// only on the inputs.
func Generate(w io.Writer, tsv string) error {
	h := recording.Header{
		Created:     "2026-11-21T22:52:00Z",
		Producer:    "cupti-exporter synthetic generator (recording/demo)",
		Synthetic:   true,
		Description: "SYNTHETIC data, not measured: 60 s on 2 GH100 devices, phases idle, matmul, copies, tiny kernels, idle; NVML health every second",
		IntervalNS:  synthInterval,
	}
	rw, metrics, err := openSynthWriter(w, tsv, h, synthDevices)
	if err != nil {
		return err
	}
	sh, err := newSynthHealth(synthDevices, synthDuration, synthLoad, func(int) string { return "4242" })
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	proc := record.Process{PID: 4242, StartTime: synthStart - 5e9, Executable: "/usr/bin/python3", Cgroup: "/synthetic",
		CUDAVersion: 13000, CUPTIVersion: 130001, DeviceUUIDs: []string{synthDevices[0].UUID, synthDevices[1].UUID}}
	if err := rw.WriteHello(synthStart+1e9, recording.ProcessEvent{Conn: 1, Process: &proc}); err != nil {
		return err
	}
	for t := uint64(0); t < synthDuration; t += synthBatch {
		at := synthStart + t + synthBatch
		for _, d := range synthDevices {
			b := pmdata.Batch{Device: d.Index, Metrics: metrics}
			if t == 0 {
				b.DroppedFirst = 1
			}
			for s := t; s < t+synthBatch; s += synthInterval {
				smp := pmdata.Sample{Start: synthStart + s, End: synthStart + s + synthInterval, Values: make([]float64, len(metrics))}
				load := synthLoad(d.Index)
				for i, m := range metrics {
					v := level(bareBase(m), phaseAt(s)) * load * (1 + 0.05*rng.NormFloat64())
					smp.Values[i] = sampleValue(m, v)
				}
				b.Samples = append(b.Samples, smp)
			}
			if err := rw.WriteBatch(at, b); err != nil {
				return err
			}
		}
		if recs := activityFor(rng, t); len(recs) > 0 {
			if err := rw.WriteActivity(at, recording.ActivityBatch{Conn: 1, Records: recs}); err != nil {
				return err
			}
		}
		if (t+synthBatch)%synthHealthInterval == 0 { // one health collection a second
			if err := rw.WriteHealth(at, sh.snapshot(t+synthBatch)); err != nil {
				return err
			}
		}
	}
	if err := rw.WriteGoodbye(synthStart+synthDuration-1e9, 1); err != nil {
		return err
	}
	return rw.Close(synthStart + synthDuration)
}

// synthLoad is a device's share of the workload: the second GPU runs a smaller share.
func synthLoad(dev int) float64 {
	if dev == 1 {
		return 0.6
	}
	return 1
}

// activityFor makes the activity records of the batch that starts at t.
func activityFor(rng *rand.Rand, t uint64) []record.Record {
	var recs []record.Record
	add := func(n int, mk func(start uint64) record.Record) {
		for i := 0; i < n; i++ {
			start := synthStart + t + uint64(i)*synthBatch/uint64(n)
			r := mk(start)
			r.Device = uint32(i % 2)
			r.Stream = 7
			recs = append(recs, r)
		}
	}
	switch phaseAt(t) {
	case "matmul":
		add(25, func(s uint64) record.Record { // ~4-12 ms GEMMs
			return record.Record{Kind: record.KindKernel, Start: s, End: s + uint64(4e6+rng.Float64()*8e6),
				Name: "_Z16gemm_bf16_kernelILi128ELi256EEvPK13__nv_bfloat16S2_PS0_iii"}
		})
	case "copies":
		add(10, func(s uint64) record.Record {
			ck := record.CopyKind(1 + rng.IntN(2)) // HtoD or DtoH
			src, dst := record.MemoryKind(2), record.MemoryKind(3)
			if ck == 2 {
				src, dst = dst, src
			}
			return record.Record{Kind: record.KindMemcpy, Start: s, End: s + uint64(10e6+rng.Float64()*5e6),
				Bytes: 256 << 20, CopyKind: ck, SrcKind: src, DstKind: dst}
		})
		add(2, func(s uint64) record.Record {
			return record.Record{Kind: record.KindMemset, Start: s, End: s + 50e3, Bytes: 64 << 20, MemoryKind: 3}
		})
	case "tiny kernels":
		add(120, func(s uint64) record.Record { // ~3-8 us kernels
			return record.Record{Kind: record.KindKernel, Start: s, End: s + uint64(3e3+rng.Float64()*5e3),
				Name: "_Z15vector_add_tinyPfPKfS1_i"}
		})
	}
	return recs
}

// sampleValue turns a metric's generated level into what one PM sample holds: a counter
// (".sum") the whole count of one sample interval at that rate per second, a ratio or
// percentage at most 100; never below zero.
func sampleValue(metric string, level float64) float64 {
	if strings.HasSuffix(metric, ".sum") {
		return max(math.Round(level*float64(synthInterval)/1e9), 0)
	}
	return max(math.Min(level, 100), 0)
}
