// Command sharesim attributes a recording offline through the attribution join, on the
// recording's own clock (each frame at the time it was written, so presence and watermarks
// are where they were live, at any speed), optionally hiding the activity connections of some
// pods so that processes traced while recording count as untraced (they stay in NVML's
// process lists, as an untraced process does). It prints the attribution's families and the
// device's DRAM read total as Prometheus text, which scripts/gpu/attrib_share_check.py reads
// like a scrape (issue 31: scripts/gpu/share_offline.sh runs every case of stage
// attrib_share_record's recordings).
//
//	go run ./scripts/gpu/sharesim [-hide pod,pod] [-estimator rate] REC[.gz] > metrics.txt
//	go run ./scripts/gpu/sharesim -groups REC[.gz]   # DRAM bandwidth by the kernels running together
//	go run ./scripts/gpu/sharesim -cuts REC[.gz]     # how much of each kernel class's records others' turns cut
//	go run ./scripts/gpu/sharesim -durations REC[.gz] # each kernel class's durations alone and beside another pod's
package main

import (
	"bufio"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/recording"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

func main() {
	hide := flag.String("hide", "", "comma-separated pods whose connections are dropped (their processes replay as untraced)")
	est := flag.String("estimator", attribution.DefaultEstimator, "attribution estimator")
	merge := flag.Int("merge", 1, "deliver every N recorded PM batches of a device as one, as a decode period N times as long would")
	byGroup := flag.Bool("groups", false, "print the DRAM read bandwidth of the samples by the set of traced kernels running through them, instead of attributing")
	byCut := flag.Bool("cuts", false, "print how many of each traced kernel class's records, and how much of their time, another pod's turn cut, instead of attributing")
	byDur := flag.Bool("durations", false, "print the durations of each traced kernel class's records that overlapped another pod's record and of those that did not, instead of attributing")
	flag.Parse()
	if flag.NArg() != 1 || *merge < 1 {
		fmt.Fprintln(os.Stderr, "usage: sharesim [-hide pod,pod] [-estimator rate] [-merge N] [-groups | -cuts | -durations] REC[.gz]")
		os.Exit(2)
	}
	for _, m := range []struct {
		on  bool
		run func(string, io.Writer) error
	}{{*byGroup, groups}, {*byCut, cuts}, {*byDur, durations}} {
		if m.on {
			if err := m.run(flag.Arg(0), os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, "sharesim:", err)
				os.Exit(1)
			}
			return
		}
	}
	hidden := map[string]bool{}
	for _, p := range strings.Split(*hide, ",") {
		if p != "" {
			hidden[p] = true
		}
	}
	if err := run(flag.Arg(0), hidden, *est, *merge, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sharesim:", err)
		os.Exit(1)
	}
}

func open(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return f, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}, nil
}

// openRecording opens the recording at path (gzipped if it ends in .gz) for reading; the
// caller closes the file.
func openRecording(path string) (*recording.Reader, io.Closer, error) {
	f, err := open(path)
	if err != nil {
		return nil, nil, err
	}
	rd, err := recording.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return rd, f, nil
}

// eachEvent calls fn with each event of the recording at path, in order.
func eachEvent(path string, fn func(recording.Event)) error {
	rd, f, err := openRecording(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for ev := range rd.Events() {
		fn(ev)
	}
	return rd.Err()
}

func run(path string, hidden map[string]bool, est string, merge int, w io.Writer) error {
	snap, dramRead, err := replay(path, hidden, est, merge)
	if err != nil {
		return err
	}
	return write(w, snap, dramRead)
}

// replay attributes the recording at path and returns the attribution's snapshot and each
// device's DRAM read total. Every merge PM batches of a device reach the join as one (1: as
// recorded).
func replay(path string, hidden map[string]bool, est string, merge int) (*snapshot.Snapshot, map[int]float64, error) {
	rd, f, err := openRecording(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	m, err := mapping.New()
	if err != nil {
		return nil, nil, err
	}
	var (
		clock    time.Time
		devices  []pmdata.Device
		attr     *attribution.Attributor
		agg      *activity.Aggregator
		procs    = map[uint64]*record.Process{}
		dramRead = map[int]float64{}
		held     = map[int]*heldBatch{} // by device, while merging
	)
	now := func() time.Time { return clock }
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for ev := range rd.Events() {
		clock = time.Unix(0, int64(ev.Time))
		switch ev.Type {
		case recording.FrameDevices:
			devices = ev.Devices
		case recording.FrameCatalog:
			attr, err = attribution.New(devices, ev.Catalog, m, logger, attribution.WithClock(now), attribution.WithEstimator(est),
				attribution.WithKernelFamilies(nil), attribution.WithPodFamilies(nil))
			if err != nil {
				return nil, nil, err
			}
			agg = activity.NewAggregator(activity.WithGPUResolver(func(uuid string) (string, bool) {
				for _, d := range devices {
					if strings.EqualFold(d.UUID, uuid) {
						return strconv.Itoa(d.Index), true
					}
				}
				return "", false
			}), activity.WithListener(attr), activity.WithTrustHelloPods(true)) // as the live stage runs (--activity.trust-hello-pods)
		case recording.FrameBatch:
			if attr == nil {
				return nil, nil, errors.New("a PM batch before the catalog")
			}
			for j, name := range ev.Batch.Metrics {
				if name == "dram__bytes_read.sum" {
					for _, s := range ev.Batch.Samples {
						dramRead[ev.Batch.Device] += s.Values[j]
					}
				}
			}
			if b, ok := merged(held, ev.Batch, merge); ok {
				attr.Add(b)
			}
		case recording.FrameHello:
			if hidden[ev.Process.Process.Pod] {
				continue
			}
			p := *ev.Process.Process
			procs[ev.Process.Conn] = &p
			agg.Connect(&p)
		case recording.FrameActivity:
			if p := procs[ev.Activity.Conn]; p != nil {
				agg.Add(p, ev.Activity.Records)
			}
		case recording.FrameCoverage:
			if p := procs[ev.Coverage.Conn]; p != nil {
				agg.Coverage(p, ev.Coverage.Spans)
			}
		case recording.FrameGoodbye:
			if p := procs[ev.Process.Conn]; p != nil {
				agg.Disconnect(p)
				delete(procs, ev.Process.Conn)
			}
		case recording.FrameProcesses:
			if attr != nil {
				attr.ObserveProcesses(ev.Procs.Observation())
			}
		}
	}
	if err := rd.Err(); err != nil {
		return nil, nil, err
	}
	if attr == nil {
		return nil, nil, errors.New("no catalog in the recording")
	}
	for _, h := range held {
		attr.Add(h.b)
	}
	clock = clock.Add(time.Minute)
	attr.Flush()
	return attr.Snapshot(), dramRead, nil
}

func write(w io.Writer, snap *snapshot.Snapshot, dramRead map[int]float64) error {
	bw := bufio.NewWriter(w)
	for dev, v := range dramRead {
		fmt.Fprintf(bw, "cupti_dram_read_bytes_total{gpu=\"%d\"} %g\n", dev, v)
	}
	var lines []string
	for _, f := range snap.Families {
		for _, s := range f.Samples {
			var l []string
			for i, n := range f.Desc.LabelNames {
				l = append(l, fmt.Sprintf("%s=%q", n, s.LabelValues[i]))
			}
			lines = append(lines, fmt.Sprintf("%s{%s} %g", f.Desc.Name, strings.Join(l, ","), s.Value))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(bw, l)
	}
	return bw.Flush()
}

// heldBatch is a device's batches merged so far (n of them).
type heldBatch struct {
	b pmdata.Batch
	n int
}

// merged adds b to its device's held batches and returns them as one batch once merge of them
// are held (b itself where merge is 1).
func merged(held map[int]*heldBatch, b *pmdata.Batch, merge int) (pmdata.Batch, bool) {
	if merge <= 1 {
		return *b, true
	}
	h := held[b.Device]
	if h == nil {
		h = &heldBatch{b: *b}
		h.b.Samples, h.b.Lost = slices.Clone(b.Samples), slices.Clone(b.Lost)
		held[b.Device] = h
	} else {
		h.b.Samples = append(h.b.Samples, b.Samples...)
		h.b.Lost = append(h.b.Lost, b.Lost...)
	}
	if h.n++; h.n < merge {
		return pmdata.Batch{}, false
	}
	delete(held, b.Device)
	return h.b, true
}
