// Command recfilter copies a recording without the activity connections of some pods, so
// that a process that was traced while recording replays as untraced (stage attrib_record:
// the "ghost" pods; scripts/gpu/attrib_offline.sh replays the result). Its kernels stay
// known from the original recording, so the join's handling of untraced work can be
// checked against them.
//
//	go run ./scripts/gpu/recfilter -drop-pod-prefix ghost- IN.rec OUT.rec
//
// With -dump it prints the recording as text instead, one line per PM sample ("S start end
// value..." in the order of the last "M name..." line), kernel record ("K pod start end name") and NVML
// process observation ("N start end pid:share[:mps-server|mps-client]..."), for analyses such as
// scripts/gpu/attrib_ctxsw.py:
//
//	go run ./scripts/gpu/recfilter -dump IN.rec > IN.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/recording"
)

func main() {
	prefix := flag.String("drop-pod-prefix", "ghost-", "drop the connections whose hello names a pod with this prefix")
	dumpText := flag.Bool("dump", false, "print the recording as text (samples, kernel records, NVML observations)")
	flag.Parse()
	if *dumpText && flag.NArg() == 1 {
		if err := dump(flag.Arg(0)); err != nil {
			fmt.Fprintln(os.Stderr, "recfilter:", err)
			os.Exit(1)
		}
		return
	}
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: recfilter [-drop-pod-prefix P] IN.rec OUT.rec | recfilter -dump IN.rec")
		os.Exit(2)
	}
	if err := filter(flag.Arg(0), flag.Arg(1), *prefix); err != nil {
		fmt.Fprintln(os.Stderr, "recfilter:", err)
		os.Exit(1)
	}
}

// open opens a recording and reads its header.
func open(path string) (*os.File, *recording.Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	rd, err := recording.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, rd, nil
}

func filter(in, out, prefix string) error {
	f, rd, err := open(in)
	if err != nil {
		return err
	}
	defer f.Close()
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
	for ev := range rd.Events() {
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
			err = w.WriteProcesses(ev.Time, ev.Procs.Observation())
		}
		if err != nil {
			return err
		}
	}
	if err := rd.Err(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "recfilter: dropped %d connections\n", dropped)
	return w.Close(last)
}

func dump(in string) error {
	f, rd, err := open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	pods := map[uint64]string{}
	var metrics string
	for ev := range rd.Events() {
		switch ev.Type {
		case recording.FrameBatch:
			if m := strings.Join(ev.Batch.Metrics, " "); m != metrics {
				metrics = m
				fmt.Fprintf(out, "M %s\n", m)
			}
			for _, s := range ev.Batch.Samples {
				fmt.Fprintf(out, "S %d %d", s.Start, s.End)
				for _, v := range s.Values {
					fmt.Fprintf(out, " %g", v)
				}
				fmt.Fprintln(out)
			}
		case recording.FrameHello:
			pods[ev.Process.Conn] = ev.Process.Process.Pod
		case recording.FrameActivity:
			for _, r := range ev.Activity.Records {
				if r.Kind == record.KindKernel {
					fmt.Fprintf(out, "K %s %d %d %s\n", pods[ev.Activity.Conn], r.Start, r.End, r.Name)
				}
			}
		case recording.FrameProcesses:
			fmt.Fprintf(out, "N %d %d", ev.Procs.Start, ev.Procs.End)
			for _, p := range ev.Procs.Processes {
				share := "?"
				if p.SMShare != nil {
					share = fmt.Sprint(*p.SMShare)
				}
				fmt.Fprintf(out, " %d:%s", p.PID, share)
				if p.MPS != "" {
					fmt.Fprintf(out, ":mps-%s", p.MPS)
				}
			}
			fmt.Fprintln(out)
		}
	}
	return rd.Err()
}
