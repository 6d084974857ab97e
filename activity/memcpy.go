package activity

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var (
	memcpyLabels = []string{"gpu", "uuid", "namespace", "pod", "container", "copy_kind", "host_memory", "src_gpu"}
	memsetLabels = []string{"gpu", "uuid", "namespace", "pod", "container", "memory"}

	memcpyBytesDesc    = descs.Counter("cupti_memcpy_bytes_total", "bytes", "cupti.memcpy.io", "By", "Bytes copied by CUDA memcpy operations by GPU (the destination of peer-to-peer copies), pod, copy kind, host memory kind and source GPU of peer-to-peer copies.", memcpyLabels...)
	memcpyDurationDesc = descs.Histogram("cupti_memcpy_duration_seconds", "seconds", "cupti.memcpy.duration", "s", "Duration of CUDA memcpy operations by GPU (the destination of peer-to-peer copies), pod, copy kind, host memory kind and source GPU of peer-to-peer copies.", memcpyLabels...)
	memsetBytesDesc    = descs.Counter("cupti_memset_bytes_total", "bytes", "cupti.memset.io", "By", "Bytes set by CUDA memset operations by GPU, pod and memory kind.", memsetLabels...)
	memsetDurationDesc = descs.Histogram("cupti_memset_duration_seconds", "seconds", "cupti.memset.duration", "s", "Duration of CUDA memset operations by GPU, pod and memory kind.", memsetLabels...)
)

// CUPTI copy kinds (CUpti_ActivityMemcpyKind) and memory kinds (CUpti_ActivityMemoryKind).
const (
	copyHtoD record.CopyKind = 1
	copyDtoH record.CopyKind = 2
	copyHtoA record.CopyKind = 3
	copyAtoH record.CopyKind = 4
	copyDtoD record.CopyKind = 8
	copyHtoH record.CopyKind = 9
	copyPtoP record.CopyKind = 10

	memPageable      record.MemoryKind = 1
	memPinned        record.MemoryKind = 2
	memDevice        record.MemoryKind = 3
	memArray         record.MemoryKind = 4
	memManaged       record.MemoryKind = 5
	memDeviceStatic  record.MemoryKind = 6
	memManagedStatic record.MemoryKind = 7
)

// copyKindLabel is the copy_kind label value: HtoD, DtoH, DtoD, PtoP, HtoH or other.
func copyKindLabel(k record.CopyKind) string {
	switch k {
	case copyHtoD:
		return "HtoD"
	case copyDtoH:
		return "DtoH"
	case copyDtoD:
		return "DtoD"
	case copyPtoP:
		return "PtoP"
	case copyHtoH:
		return "HtoH"
	}
	return "other"
}

// memoryLabel is the label value of a memory kind: pageable, pinned, device, array,
// managed or unknown (static kinds count as their dynamic twins).
func memoryLabel(k record.MemoryKind) string {
	switch k {
	case memPageable:
		return "pageable"
	case memPinned:
		return "pinned"
	case memDevice, memDeviceStatic:
		return "device"
	case memArray:
		return "array"
	case memManaged, memManagedStatic:
		return "managed"
	}
	return "unknown"
}

// hostMemoryLabel is the host_memory label of a copy: the memory kind of its host side
// (source for HtoD, HtoA and HtoH, destination for DtoH and AtoH), "none" for copies with
// no host side (DtoD, PtoP, array copies).
func hostMemoryLabel(r *record.Record) string {
	switch r.CopyKind {
	case copyHtoD, copyHtoA, copyHtoH:
		return memoryLabel(r.SrcKind)
	case copyDtoH, copyAtoH:
		return memoryLabel(r.DstKind)
	}
	return "none"
}

type memcpyKey struct {
	dev  *device
	pod  *podRef
	copy record.CopyKind
	host string // host_memory label (a constant string: cheap to hash)
	src  string // src_gpu label: "" unless PtoP
}

// srcGPULabel is the src_gpu label of a copy: for PtoP, the gpu label of the source device
// when it is one of the process's hello devices (so the values are bounded by the GPUs the
// processes report, at most MaxDevices each), else "unknown"; "" for other copies.
func srcGPULabel(ps *procState, r *record.Record) string {
	if r.CopyKind != copyPtoP {
		return ""
	}
	if int64(r.SrcDevice) < int64(len(ps.devs)) && !ps.devs[r.SrcDevice].unknown {
		return ps.devs[r.SrcDevice].gpu
	}
	return "unknown"
}

type memsetKey struct {
	dev *device
	pod *podRef
	mem string
}

type memSeries struct {
	bytes       float64
	start, last time.Time
}

func (a *Aggregator) observeMemcpy(ps *procState, dev *device, r *record.Record, dur float64, now time.Time) {
	ck := r.CopyKind
	if copyKindLabel(ck) == "other" {
		ck = 0
	}
	key := memcpyKey{dev, ps.pod, ck, hostMemoryLabel(r), srcGPULabel(ps, r)}
	s := a.memcpy[key]
	if s == nil {
		s = &memSeries{start: now}
		a.memcpy[key] = s
	}
	s.last = now
	s.bytes += float64(r.Bytes)
	key.dev, key.pod = a.histSeriesOf(a.cfg.copySplit, dev, ps.pod)
	if key.dev == a.nodeDevice {
		key.src = "" // a node-wide histogram has no source GPU either
	}
	histOf(a.memcpyHist, key, a.cfg.buckets, a.cfg.maxBuckets, now).h.observe(dur)
}

// histOf returns the histogram series of key in m, made on first use.
func histOf[K comparable](m map[K]*kernelSeries, key K, bounds []float64, maxBuckets int, now time.Time) *kernelSeries {
	s := m[key]
	if s == nil {
		s = &kernelSeries{h: newHistogram(bounds, maxBuckets), start: now}
		m[key] = s
	}
	s.last = now
	return s
}

func (a *Aggregator) observeMemset(ps *procState, dev *device, r *record.Record, dur float64, now time.Time) {
	key := memsetKey{dev, ps.pod, memoryLabel(r.MemoryKind)}
	s := a.memset[key]
	if s == nil {
		s = &memSeries{start: now}
		a.memset[key] = s
	}
	s.last = now
	s.bytes += float64(r.Bytes)
	key.dev, key.pod = a.histSeriesOf(a.cfg.copySplit, dev, ps.pod)
	histOf(a.memsetHist, key, a.cfg.buckets, a.cfg.maxBuckets, now).h.observe(dur)
}

// memFamilies appends the memcpy and memset families.
func (a *Aggregator) memFamilies(fs []snapshot.Family) []snapshot.Family {
	cb, cd := snapshot.Family{Desc: memcpyBytesDesc}, snapshot.Family{Desc: memcpyDurationDesc}
	memcpyLabels := func(k memcpyKey) []string {
		return []string{k.dev.gpu, k.dev.uuid, k.pod.namespace, k.pod.pod, k.pod.container, copyKindLabel(k.copy), k.host, k.src}
	}
	for k, s := range a.memcpy {
		cb.Samples = append(cb.Samples, snapshot.Sample{LabelValues: memcpyLabels(k), Value: s.bytes, Start: s.start})
	}
	for k, s := range a.memcpyHist {
		cd.Samples = append(cd.Samples, snapshot.Sample{LabelValues: memcpyLabels(k), Histogram: s.h.value(), Start: s.start})
	}
	sb, sd := snapshot.Family{Desc: memsetBytesDesc}, snapshot.Family{Desc: memsetDurationDesc}
	memsetLabels := func(k memsetKey) []string {
		return []string{k.dev.gpu, k.dev.uuid, k.pod.namespace, k.pod.pod, k.pod.container, k.mem}
	}
	for k, s := range a.memset {
		sb.Samples = append(sb.Samples, snapshot.Sample{LabelValues: memsetLabels(k), Value: s.bytes, Start: s.start})
	}
	for k, s := range a.memsetHist {
		sd.Samples = append(sd.Samples, snapshot.Sample{LabelValues: memsetLabels(k), Histogram: s.h.value(), Start: s.start})
	}
	return append(fs, sorted(cb), sorted(cd), sorted(sb), sorted(sd))
}
