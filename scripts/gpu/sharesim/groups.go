package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

// groupFull is the share of a sample a kernel class's records must cover for the sample to
// count as that class running through it.
const groupFull = 0.95

// groupSample is one PM sample's span and DRAM read bytes.
type groupSample struct {
	start, end uint64
	bytes      float64
}

// groupRec is one traced kernel's span, with its class: pod and kernel name.
type groupRec struct {
	start, end uint64
	class      string
}

// groups prints, for each set of traced kernel classes (pod:kernel) that ran through whole
// samples together, how many samples and their mean DRAM read bandwidth; samples that a class
// covers only in part are left out (-groups; docs/attribution.md, "Why MPS clients cannot be
// told apart under saturation"). It reads the recording's first device only, and sees traced
// kernels only: an untraced process's work is in every group's bandwidth.
func groups(path string, w io.Writer) error {
	var (
		samples []groupSample
		recs    []groupRec
		kernels podKernels
		dev     = -1
	)
	err := eachEvent(path, func(ev recording.Event) {
		if kernels.read(ev, func(pod string, r record.Record) {
			recs = append(recs, groupRec{r.Start, r.End, pod + ":" + r.Name})
		}) || ev.Type != recording.FrameBatch {
			return
		}
		if dev < 0 {
			dev = ev.Batch.Device
		}
		j := slices.Index(ev.Batch.Metrics, "dram__bytes_read.sum")
		if ev.Batch.Device != dev || j < 0 {
			return
		}
		for _, s := range ev.Batch.Samples {
			samples = append(samples, groupSample{s.Start, s.End, s.Values[j]})
		}
	})
	if err != nil {
		return err
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].start < samples[j].start })
	sort.Slice(recs, func(i, j int) bool { return recs[i].start < recs[j].start })
	type group struct {
		n     int
		bytes float64
		secs  float64
	}
	byKey := map[string]*group{}
	cover := map[string]uint64{}
	first := 0 // the first record that may reach the current sample
	for _, s := range samples {
		if s.end <= s.start {
			continue
		}
		for first < len(recs) && recs[first].end <= s.start && recs[first].start < s.start {
			first++
		}
		clear(cover)
		for _, r := range recs[first:] {
			if r.start >= s.end {
				break
			}
			if lo, hi := max(r.start, s.start), min(r.end, s.end); hi > lo {
				cover[r.class] += hi - lo
			}
		}
		full := true
		for _, c := range cover {
			full = full && float64(c) >= groupFull*float64(s.end-s.start)
		}
		if !full {
			continue
		}
		key := strings.Join(slices.Sorted(maps.Keys(cover)), " + ")
		if key == "" {
			key = "(no traced kernel)"
		}
		g := byKey[key]
		if g == nil {
			g = &group{}
			byKey[key] = g
		}
		g.n++
		g.bytes += s.bytes
		g.secs += float64(s.end-s.start) / 1e9
	}
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b string) int { return byKey[b].n - byKey[a].n })
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "samples\tGB/s\ttraced kernels running through the whole sample")
	for _, k := range keys {
		g := byKey[k]
		fmt.Fprintf(bw, "%d\t%.1f\t%s\n", g.n, g.bytes/g.secs/1e9, k)
	}
	return bw.Flush()
}

// podKernels learns each activity connection's pod from the hello frames and hands on the
// kernel records (of positive length) of the connections it knows.
type podKernels struct{ pods map[uint64]string }

// read takes a hello or activity frame, calling fn with each kernel record of a known pod
// and its pod; it reports whether ev was one of those frames.
func (k *podKernels) read(ev recording.Event, fn func(pod string, r record.Record)) bool {
	switch ev.Type {
	case recording.FrameHello:
		if k.pods == nil {
			k.pods = map[uint64]string{}
		}
		k.pods[ev.Process.Conn] = ev.Process.Process.Pod
	case recording.FrameActivity:
		if pod, ok := k.pods[ev.Activity.Conn]; ok {
			for _, r := range ev.Activity.Records {
				if r.Kind == record.KindKernel && r.End > r.Start {
					fn(pod, r)
				}
			}
		}
	default:
		return false
	}
	return true
}

// podRec is one traced kernel's span, with its pod and class (pod:kernel).
type podRec struct {
	start, end uint64
	pod, class string
}

// firstDeviceKernels reads the kernel records of the known pods on the recording's first
// device (the device of the first such record).
func firstDeviceKernels(path string) ([]podRec, error) {
	var (
		recs    []podRec
		kernels podKernels
		dev     = -1
	)
	err := eachEvent(path, func(ev recording.Event) {
		kernels.read(ev, func(pod string, r record.Record) {
			if dev < 0 {
				dev = int(r.Device)
			}
			if int(r.Device) == dev {
				recs = append(recs, podRec{r.Start, r.End, pod, pod + ":" + r.Name})
			}
		})
	})
	return recs, err
}
