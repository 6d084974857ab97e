// Command recfilter copies a recording without the activity connections of some pods, so
// that a process that was traced while recording replays as untraced (stage attrib_record:
// the "ghost" pods; scripts/gpu/attrib_offline.sh replays the result). Its kernels stay
// known from the original recording, so the join's handling of untraced work can be
// checked against them.
//
//	go run ./scripts/gpu/recfilter -drop-pod-prefix ghost- IN.rec OUT.rec
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/recording"
)

func main() {
	prefix := flag.String("drop-pod-prefix", "ghost-", "drop the connections whose hello names a pod with this prefix")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: recfilter [-drop-pod-prefix P] IN.rec OUT.rec")
		os.Exit(2)
	}
	if err := filter(flag.Arg(0), flag.Arg(1), *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "recfilter:", err)
		os.Exit(1)
	}
}

func filter(in, out, prefix string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	rd, err := recording.NewReader(f)
	if err != nil {
		return err
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	defer o.Close()
	w, err := recording.NewWriter(o, rd.Header(), 0)
	if err != nil {
		return err
	}
	drop := map[uint64]bool{}
	var dropped, last uint64
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		last = ev.Time
		switch ev.Type {
		case recording.FrameDevices:
			err = w.WriteDevices(ev.Time, ev.Devices)
		case recording.FrameCatalog:
			err = w.WriteCatalog(ev.Time, ev.Catalog)
		case recording.FrameBatch:
			err = w.WriteBatch(ev.Time, *ev.Batch)
		case recording.FrameHello:
			if strings.HasPrefix(ev.Process.Process.Pod, prefix) {
				drop[ev.Process.Conn] = true
				dropped++
				continue
			}
			err = w.WriteHello(ev.Time, *ev.Process)
		case recording.FrameGoodbye:
			if !drop[ev.Process.Conn] {
				err = w.WriteGoodbye(ev.Time, ev.Process.Conn)
			}
		case recording.FrameActivity:
			if !drop[ev.Activity.Conn] {
				err = w.WriteActivity(ev.Time, *ev.Activity)
			}
		case recording.FrameCoverage:
			if !drop[ev.Coverage.Conn] {
				err = w.WriteCoverage(ev.Time, *ev.Coverage)
			}
		case recording.FrameHealth:
			err = w.WriteHealth(ev.Time, ev.Health)
		case recording.FrameProcesses:
			err = w.WriteProcesses(ev.Time, *ev.Procs)
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "recfilter: dropped %d connections\n", dropped)
	return w.Close(last)
}
