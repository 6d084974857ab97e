package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestTensorShareBesideUntraced is issue 31's regression on real GPU data: run BB's
// recordings (one NVIDIA H100 80GB HBM3, the tune set of scripts/gpu/share_truth.cu, every
// process traced while recording) replayed with the tensor process hidden, so it joins as
// an untraced process. The pods t-stream and t-light never use the tensor pipe (their roles
// launch no mma kernel), so each should get at most 1 % of the tensor-active seconds (issue
// 31). The join before the quiet-class bound and the carrying of vanished processes
// (docs/attribution.md, "Ratio metrics beside untraced processes") gave them 3.56 %, 2.19 %
// and 30.63 % in these cases; 0.02-0.10 % now. Two live tap recordings have the tensor client
// truly untraced under MPS beside a bursty client (nothing hidden): run ED's mps3p-t:1 (tune
// set) and run EC's mps3-c:1 (check set); before the MPS bound took every sample a class ran
// in and carried it from chunk to chunk, t-stream got 2.53 % and c-burst 1.21 %; 0.05 % now.
func TestTensorShareBesideUntraced(t *testing.T) {
	never := map[string]bool{"p0-t-stream": true, "p2-t-light": true, "p2-t-pulse": true, "p0-c-burst": true, "p2-c-narrow": true}
	cases := []struct {
		rec, hide string
		bound     float64 // of a pod's share of the tensor-active seconds
	}{
		{"rec-ts3-t.rec.gz", "p1-t-tensor,p2-t-light", 0.01},
		{"rec-ts3-t.rec.gz", "p0-t-stream,p1-t-tensor", 0.01},
		{"rec-mps3-t.rec.gz", "p1-t-tensor", 0.01},
		{"rec-mps3p-t_1.rec.gz", "", 0.01},
		{"rec-mps3-c_1.rec.gz", "", 0.01},
	}
	for _, c := range cases {
		t.Run(c.rec+":"+c.hide, func(t *testing.T) {
			hidden := map[string]bool{}
			for _, p := range strings.Split(c.hide, ",") {
				hidden[p] = true
			}
			snap, _, err := replay("testdata/"+c.rec, hidden, "rate", 1)
			if err != nil {
				t.Fatal(err)
			}
			pods, all := tensorSeconds(snap)
			if all <= 0 {
				t.Fatal("no tensor-active seconds attributed")
			}
			checked := 0
			for pod, v := range pods {
				if !never[pod] || hidden[pod] {
					continue
				}
				checked++
				t.Logf("%s: %.4f of %.4f tensor-active seconds (%.2f %%)", pod, v, all, 100*v/all)
				if v > c.bound*all {
					t.Errorf("%s never used the tensor pipe but got %.2f %% of its active seconds (bound %.1f %%)", pod, 100*v/all, 100*c.bound)
				}
			}
			if checked == 0 {
				t.Fatal("no traced pod that never uses the pipe in the output")
			}
		})
	}
}

// TestTensorShareOfABurstyUntracedProcess replays run FD's live tap recording of the 2 + 1
// case with the tune set's bursty t-flick truly untraced beside the traced t-stream and
// t-tensor (one NVIDIA H200, 8 s a process). t-flick never uses the tensor pipe, so its class
// should get at most 1 % of the tensor-active seconds (issue 31), and the traced pods keep
// issue 31's DRAM targets. Before the turns read the pipes (attribution/turns.go, Plausible)
// they gave t-flick two thirds of samples in which t-tensor's kernel kept the tensor pipe
// 99.7 % busy, its class took a tensor rate of 0.18 there and carried it: 1.59 % of the
// tensor-active seconds, as live.
func TestTensorShareOfABurstyUntracedProcess(t *testing.T) {
	snap, _, err := replay("testdata/rec-ts3f-t_2.rec.gz", nil, "rate", 1)
	if err != nil {
		t.Fatal(err)
	}
	untraced := kernelSum(snap, "cupti_kernel_tensor_pipe_active_seconds_total", "(untraced)")
	_, all := tensorSeconds(snap)
	t.Logf("(untraced) t-flick: %.4f of %.4f tensor-active seconds (%.2f %%)", untraced, all, 100*untraced/all)
	if all <= 0 || untraced > 0.01*all {
		t.Errorf("the untraced t-flick never used the tensor pipe but got %.2f %% of its active seconds (bound 1 %%)", 100*untraced/all)
	}
	got := tracedPods(snap, "cupti_pod_dram_read_bytes_total")
	checkBytes(t, "p0-t-stream", got["p0-t-stream"], 10442945593344, 0.05)
	checkBytes(t, "p1-t-tensor", got["p1-t-tensor"], 2959296823296, 0.05)
	checkBytes(t, "(untraced) t-flick", kernelSum(snap, "cupti_kernel_dram_read_bytes_total", "(untraced)"), 3458038628352, 0.15)
}

// tensorSeconds sums the replay's tensor-active seconds: each traced pod's, and the device's
// over the kernel series.
func tensorSeconds(snap *snapshot.Snapshot) (pods map[string]float64, all float64) {
	for _, f := range snap.Families {
		if f.Desc.Name == "cupti_kernel_tensor_pipe_active_seconds_total" {
			for _, x := range f.Samples {
				all += x.Value
			}
		}
	}
	return tracedPods(snap, "cupti_pod_tensor_pipe_active_seconds_total"), all
}

// tracedPods sums per-pod family name's series of traced pods (source="kernel") by pod.
func tracedPods(snap *snapshot.Snapshot, name string) map[string]float64 {
	pods := map[string]float64{}
	for k, v := range podSums(snap, name) {
		if k.source == "kernel" {
			pods[k.pod] += v
		}
	}
	return pods
}

// podSource is a per-pod series' pod and source ("kernel" for traced pods, "nvml" for the
// untraced processes NVML shows).
type podSource struct{ pod, source string }

// podSums sums per-pod family name's series by pod and source.
func podSums(snap *snapshot.Snapshot, name string) map[podSource]float64 {
	sums := map[podSource]float64{}
	for _, f := range snap.Families {
		if f.Desc.Name != name {
			continue
		}
		pod, source := slices.Index(f.Desc.LabelNames, "pod"), slices.Index(f.Desc.LabelNames, "source")
		for _, x := range f.Samples {
			sums[podSource{x.LabelValues[pod], x.LabelValues[source]}] += x.Value
		}
	}
	return sums
}

// TestTensorPodKeepsItsShare is the other side: beside untraced processes that never use the
// pipe, the traced tensor pod keeps its tensor-active seconds. A bound on the rate of a class
// that ran a pipe in only some of its samples, or one on the untraced processes' classes
// (their time is an estimate), took them away (tried: 30-63 % of them went to the untraced
// class of t-stream and t-light; docs/attribution.md). Under MPS too, where the bound takes
// every sample a class ran in and is carried from chunk to chunk.
func TestTensorPodKeepsItsShare(t *testing.T) {
	for _, rec := range []string{"rec-ts3-t.rec.gz", "rec-mps3-t.rec.gz"} {
		t.Run(rec, func(t *testing.T) {
			hidden := map[string]bool{"p0-t-stream": true, "p2-t-light": true}
			snap, _, err := replay("testdata/"+rec, hidden, "rate", 1)
			if err != nil {
				t.Fatal(err)
			}
			pods, all := tensorSeconds(snap)
			got := pods["p1-t-tensor"]
			t.Logf("p1-t-tensor: %.4f of %.4f tensor-active seconds (%.2f %%)", got, all, 100*got/all)
			if all <= 0 || got < 0.97*all {
				t.Errorf("the traced tensor pod kept %.2f %% of the tensor-active seconds, want at least 97 %%", 100*got/all)
			}
		})
	}
}

// TestTensorShareMPSAllTraced replays MPS with three traced clients of the tune set (t-stream,
// t-tensor, t-light; run BB's recording on an H100 and run FP's live tap recording on an H200,
// rec-mps3-t-h200), nothing hidden: the pods that never use the tensor pipe get at most 1 %
// of its active seconds (issue 31) and the tensor pod keeps at least 99 %. Before the quiet
// bound held under MPS with every client traced (attribution/estimate.go, quietMPSTraced),
// t-stream's spin kernels, beside t-tensor's tensor kernels through nearly all their
// samples, kept a tensor rate and t-stream got 1.76 % on the H200 recording (t-tensor 98.2 %).
func TestTensorShareMPSAllTraced(t *testing.T) {
	for _, rec := range []string{"rec-mps3-t.rec.gz", "rec-mps3-t-h200.rec.gz"} {
		t.Run(rec, func(t *testing.T) {
			snap, _, err := replay("testdata/"+rec, nil, "rate", 1)
			if err != nil {
				t.Fatal(err)
			}
			pods, all := tensorSeconds(snap)
			if all <= 0 {
				t.Fatal("no tensor-active seconds attributed")
			}
			for _, pod := range []string{"p0-t-stream", "p2-t-light"} {
				t.Logf("%s: %.2f %% of the tensor-active seconds", pod, 100*pods[pod]/all)
				if pods[pod] > 0.01*all {
					t.Errorf("%s never used the tensor pipe but got %.2f %% of its active seconds (bound 1 %%)", pod, 100*pods[pod]/all)
				}
			}
			if got := pods["p1-t-tensor"]; got < 0.99*all {
				t.Errorf("the tensor pod kept %.2f %% of the tensor-active seconds, want at least 99 %%", 100*got/all)
			}
		})
	}
}

// TestTimeSlicedPodsAllTraced replays run DE's recording of three processes time-slicing an
// H100 (the check set of scripts/gpu/share_truth.cu: c-burst, c-tensor, c-steady; every
// process traced) and checks each pod's DRAM read bytes against what its kernels are known
// to read (truth-ts3-c-pN.json of the run; the device reads 0.4 % more than the kernels' own
// bytes, spread over the pods), within issue 31's 5 %. With rates fitted over the samples
// that hold a context switch as well, the bursty pod got -4.4 %; the rates of whole turns gave
// each pod 1.4 % or less; keeping the time of the short records no other turn cut (cut.go)
// gave the bursty pod +3.6 % and the bound here went to issue 31's 5 %, a check-set cost of
// the tune set's fix (docs/attribution.md, "Records cut by another's turn"). Counting a record
// four times its class's median as cut, also where no other record's edge falls inside it (it
// lay inside another process's preempted record), took it to +2.7 %: the bound is 3 % again.
func TestTimeSlicedPodsAllTraced(t *testing.T) {
	known := map[string]float64{"p0-c-burst": 1349409718272, "p1-c-tensor": 7166936088576, "p2-c-steady": 9710330707968}
	snap, _, err := replay("testdata/rec-ts3-c.rec.gz", nil, "rate", 1)
	if err != nil {
		t.Fatal(err)
	}
	got := tracedPods(snap, "cupti_pod_dram_read_bytes_total")
	for pod, want := range known {
		checkBytes(t, pod, got[pod], want, 0.03)
	}
}

// TestBurstyReadersCutOrNot replays two live tap recordings of run FI (one NVIDIA H200, 8 s a
// process, every process traced; the tune set of scripts/gpu/share_truth.cu): t-nibble's
// short narrow reads, which other processes' turns never cut, beside t-stream, t-tensor and
// t-light; and t-trickle's, the same kernels in bursts that outlast a time slice, so others'
// turns cut 56-65 % of their records' time, beside t-stream and t-tensor. Each pod must be
// within issue 31's 5 %. Before the join told cut records from uncut ones (attribution/cut.go)
// t-nibble read -7.3 % (its switch samples given out more than once, to the fast reader's
// odds) and t-trickle +5.2 % (a cut record credited with all the time its span covers).
func TestBurstyReadersCutOrNot(t *testing.T) {
	for _, c := range []struct {
		rec   string
		known map[string]float64
	}{
		{"testdata/rec-ts4n-t.rec.gz", map[string]float64{"p0-t-stream": 8133363499008, "p1-t-tensor": 2506715430912,
			"p2-t-light": 2213420335104, "p3-t-nibble": 896276299776}},
		{"testdata/rec-ts3k-t.rec.gz", map[string]float64{"p0-t-stream": 9986869297152, "p1-t-tensor": 2969119752192,
			"p2-t-trickle": 1864322482176}},
	} {
		snap, _, err := replay(c.rec, nil, "rate", 1)
		if err != nil {
			t.Fatal(err)
		}
		got := tracedPods(snap, "cupti_pod_dram_read_bytes_total")
		for pod, want := range c.known {
			checkBytes(t, pod, got[pod], want, 0.05)
		}
	}
}

// TestNarrowReadersBesideUntraced replays narrow bursty readers traced beside untraced
// processes (the tune set of scripts/gpu/share_truth.cu, one NVIDIA H200): run FL's live tap
// recording of t-nibble and t-stream traced beside a truly untraced t-tensor, and run FI's
// recordings with processes hidden, so they join as untraced: t-nibble beside an untraced
// t-light, and t-trickle (bursts that outlast a time slice) beside an untraced t-stream and
// t-tensor. Each traced pod must be within issue 31's 5 %, the untraced class within 15 %.
// An untraced process's turns leave no records, so before the join counted a record that
// lasts more than four times its class's median as cut (cut.go, cutLong) it kept the cut
// rules to GPUs whose every process is traced: t-nibble read -14.0 % (live) and -7.1 %,
// t-trickle +5.2 %. With the class's duration-weighted mean for the bar in place of the
// median, cut records raise their own bar: t-trickle +12.5 %.
func TestNarrowReadersBesideUntraced(t *testing.T) {
	for _, c := range []struct {
		rec, hide string
		known     map[string]float64
		untraced  float64
	}{
		{"rec-ts3n-t_1.rec.gz", "", map[string]float64{"p0-t-stream": 10936293654528, "p2-t-nibble": 932477534208}, 3778739306496},
		{"rec-ts4n-t.rec.gz", "p2-t-light", map[string]float64{"p0-t-stream": 8133363499008, "p1-t-tensor": 2506715430912,
			"p3-t-nibble": 896276299776}, 2213420335104},
		{"rec-ts3k-t.rec.gz", "p0-t-stream,p1-t-tensor", map[string]float64{"p2-t-trickle": 1864322482176}, 9986869297152 + 2969119752192},
	} {
		t.Run(c.rec+":"+c.hide, func(t *testing.T) {
			hidden := map[string]bool{}
			for _, p := range strings.Split(c.hide, ",") {
				hidden[p] = c.hide != ""
			}
			snap, _, err := replay("testdata/"+c.rec, hidden, "rate", 1)
			if err != nil {
				t.Fatal(err)
			}
			checkTargets(t, snap, c.known, "(untraced)", c.untraced)
		})
	}
}

// checkTargets checks issue 31's targets on a replay: each pod of traced within 5 % of its
// known DRAM read bytes, the untraced class (logged as what) within 15 % of untraced.
func checkTargets(t *testing.T, snap *snapshot.Snapshot, traced map[string]float64, what string, untraced float64) {
	t.Helper()
	got := tracedPods(snap, "cupti_pod_dram_read_bytes_total")
	for pod, want := range traced {
		checkBytes(t, pod, got[pod], want, 0.05)
	}
	checkBytes(t, what, kernelSum(snap, "cupti_kernel_dram_read_bytes_total", "(untraced)"), untraced, 0.15)
}

// checkBytes logs what, DRAM read bytes got against the known want, and fails the test where
// they are more than bound (a fraction) off.
func checkBytes(t *testing.T, what string, got, want, bound float64) {
	t.Helper()
	e := got/want - 1
	t.Logf("%s: %.1f GB of %.1f known (%+.2f %%)", what, got/1e9, want/1e9, 100*e)
	if math.Abs(e) > bound {
		t.Errorf("%s: DRAM read %+.2f %% off its known bytes (bound %.0f %%)", what, 100*e, 100*bound)
	}
}

// TestSplitsFollowNotTheDecodePeriod replays run BB's three MPS clients (the tune set; t-light
// hidden, so it joins as an untraced client) with the PM batches as recorded (100 ms decodes)
// and three at a time, as a 300 ms decode period delivers them: each pod's DRAM read bytes must
// not move. The join fitted its rates and bounds over whatever a decode released, so the
// longer batches took 5.8 and 6.3 % of the traced pods' bytes and gave the untraced client 28 %
// more (from +13.5 % to +45.6 % of its known bytes; docs/attribution.md); it now joins parts of
// about 100 ms whatever the decode period.
func TestSplitsFollowNotTheDecodePeriod(t *testing.T) {
	hidden := map[string]bool{"p2-t-light": true}
	pods := func(merge int) map[podSource]float64 {
		snap, _, err := replay("testdata/rec-mps3-t.rec.gz", hidden, "rate", merge)
		if err != nil {
			t.Fatal(err)
		}
		return podSums(snap, "cupti_pod_dram_read_bytes_total")
	}
	asRecorded, merged := pods(1), pods(3)
	if len(asRecorded) < 3 {
		t.Fatalf("pods %v: want the two traced pods and the untraced client", asRecorded)
	}
	for pod, want := range asRecorded {
		e := merged[pod]/want - 1
		t.Logf("%v: %.1f GB as recorded, %.1f GB with batches of 300 ms (%+.2f %%)", pod, want/1e9, merged[pod]/1e9, 100*e)
		if math.Abs(e) > 0.01 {
			t.Errorf("%v: DRAM read bytes moved %+.2f %% with batches three times as long (bound 1 %%)", pod, 100*e)
		}
	}
}

// TestUntracedBesideOneTracedLive replays what the live join was given (stage attrib_share
// with SHARE_TAP=1, run DY: one NVIDIA H100 80GB HBM3, 8 s a process) in the two cases of one
// traced pod time-slicing with two truly untraced processes, one of each workload set, and
// checks issue 31's targets: the traced pod within 5 % of its known DRAM read bytes, the
// untraced class within 15 % of theirs. Before the untraced processes' classes took the rates
// of whole turns (estimate.go, wholeTurnRates) and their prior chance of work at a switch
// fell to 0.8 (attribution/turns), the traced pods read −6.2 % and −6.5 %, as live.
func TestUntracedBesideOneTracedLive(t *testing.T) {
	cases := []struct {
		rec, pod         string
		traced, untraced float64 // known bytes
	}{
		{"rec-ts3-t_1-2.rec.gz", "p0-t-stream", 6940381544448, 2651191640064 + 2123162714112},
		{"rec-ts3-c_1-2.rec.gz", "p0-c-burst", 1341333159936, 7182035976192 + 9621509111808},
	}
	for _, c := range cases {
		t.Run(c.rec, func(t *testing.T) {
			snap, _, err := replay("testdata/"+c.rec, nil, "rate", 1)
			if err != nil {
				t.Fatal(err)
			}
			checkTargets(t, snap, map[string]float64{c.pod: c.traced}, "(untraced)", c.untraced)
		})
	}
}

// TestThreeTracedBesideUntracedLive replays run EE's live tap recording of issue 31's 3 + 1
// case (tune set: t-stream, t-tensor and t-light traced, a second t-stream truly untraced; one
// NVIDIA H100 80GB HBM3, 8 s a process) and checks its targets: each traced pod within 5 %, the
// untraced class within 15 %. Before a switch sample's time was placed (splitSwitch: the
// outgoing process before the switch, the incoming one after it, the switch itself quiet), the
// time of each switch went to the process whose long kernel spanned it, and t-tensor and
// t-light read −5.0 % and −5.4 %, as live. This recording took no part in choosing the change.
func TestThreeTracedBesideUntracedLive(t *testing.T) {
	known := map[string]float64{"p0-t-stream": 5126556745728, "p1-t-tensor": 1678111801344, "p2-t-light": 1648707895296}
	snap, _, err := replay("testdata/rec-ts4-t_3.rec.gz", nil, "rate", 1)
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, snap, known, "(untraced) t-stream", 5229626130432)
}

// kernelSum sums per-kernel family name's series of one kernel label.
func kernelSum(snap *snapshot.Snapshot, name, kernel string) float64 {
	var sum float64
	for _, f := range snap.Families {
		if f.Desc.Name != name {
			continue
		}
		k := slices.Index(f.Desc.LabelNames, "kernel")
		for _, x := range f.Samples {
			if x.LabelValues[k] == kernel {
				sum += x.Value
			}
		}
	}
	return sum
}

// TestBurstyUntracedBesideTwoTraced replays run DE's three-process recording (the one
// TestTimeSlicedPodsAllTraced reads) with the bursty c-burst hidden, so it joins as an
// untraced process beside the traced c-tensor and c-steady: issue 31's 2 + 1 case with the
// untraced process the one that is idle at half the switches. Its short turns lie between
// two switches of one run of switch samples, where a traced process with no record edge
// cannot be (attribution/turns, emitNoShortEdge); before that evidence its class read +88 %
// and the traced pods −7.2 % and −6.1 %.
func TestBurstyUntracedBesideTwoTraced(t *testing.T) {
	traced := map[string]float64{"p1-c-tensor": 7166936088576, "p2-c-steady": 9710330707968}
	snap, _, err := replay("testdata/rec-ts3-c.rec.gz", map[string]bool{"p0-c-burst": true}, "rate", 1)
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, snap, traced, "(untraced) c-burst", 1349409718272)
}

// TestCuts reads run FI's two tap recordings of TestBurstyReadersCutOrNot by how much of each
// kernel class's records other pods' turns cut: t-trickle's reads, in bursts longer than a
// time slice, had more than half their time cut (56 %), t-nibble's short bursts all but
// none (3 %), and a pod's own records never cut its others.
func TestCuts(t *testing.T) {
	for _, c := range []struct {
		rec, class string
		lo, hi     float64 // the share of the class's record time that was cut
	}{
		{"testdata/rec-ts3k-t.rec.gz", "p2-t-trickle:t_rd", 0.5, 0.65},
		{"testdata/rec-ts4n-t.rec.gz", "p3-t-nibble:t_rd", 0, 0.05},
	} {
		var out strings.Builder
		if err := cuts(c.rec, &out); err != nil {
			t.Fatal(err)
		}
		t.Log(out.String())
		found := false
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
			f := strings.Split(line, "\t")
			if len(f) != 5 {
				t.Fatalf("line %q: want records, cut, seconds, cut seconds and the class", line)
			}
			if f[4] != c.class {
				continue
			}
			found = true
			secs, err1 := strconv.ParseFloat(f[2], 64)
			cut, err2 := strconv.ParseFloat(f[3], 64)
			if err1 != nil || err2 != nil || secs <= 0 {
				t.Fatalf("line %q: bad seconds", line)
			}
			if share := cut / secs; share < c.lo || share > c.hi {
				t.Errorf("%s: %.2f of %s's record time cut, want %.2f-%.2f", c.rec, share, c.class, c.lo, c.hi)
			}
		}
		if !found {
			t.Errorf("%s: no line for %s", c.rec, c.class)
		}
	}
}

// TestGroups reads run BB's MPS recording (three traced clients of the tune set) by the set of
// kernels running through whole samples: the streaming client's reads alone move about 3.1
// TB/s on the H100, samples with no traced kernel read nothing, and a tensor kernel (bf16
// WMMA on tiles held in L2) with a spin kernel reads nothing either.
func TestGroups(t *testing.T) {
	var out strings.Builder
	if err := groups("testdata/rec-mps3-t.rec.gz", &out); err != nil {
		t.Fatal(err)
	}
	rates := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("line %q: want samples, GB/s and kernels", line)
		}
		gbs, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		rates[f[2]] = gbs
	}
	t.Log(out.String())
	for _, c := range []struct {
		group  string
		lo, hi float64
	}{
		{"(no traced kernel)", 0, 1},
		{"p0-t-stream:t_rd", 2500, 3500},
		{"p1-t-tensor:t_mma + p2-t-light:t_spin", 0, 1},
	} {
		got, ok := rates[c.group]
		if !ok || got < c.lo || got > c.hi {
			t.Errorf("%s: %.1f GB/s (found %v), want %g-%g", c.group, got, ok, c.lo, c.hi)
		}
	}
}

// TestDurations reads run FP's MPS recording (three traced clients of the tune set, an H200)
// by each kernel class's durations alone and beside another client's: the streaming client's
// reads run about three times as long at the median beside the others (441 → 1,281 µs), and
// its spin kernels, which wait on the clock and read nothing, 2.6 times (373 → 959 µs): a
// spin's one block an SM waits for SMs the others' blocks hold (and a longer record is likelier
// to overlap another's), so a record's stretch is not its share of the bandwidth.
func TestDurations(t *testing.T) {
	var out strings.Builder
	if err := durations("testdata/rec-mps3-t-h200.rec.gz", &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	ratio := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		f := strings.Split(line, "\t")
		if len(f) != 9 {
			t.Fatalf("line %q: want two counts, six percentiles and the class", line)
		}
		alone, err1 := strconv.ParseFloat(f[2], 64)
		beside, err2 := strconv.ParseFloat(f[6], 64)
		if err1 == nil && err2 == nil && alone > 0 {
			ratio[f[8]] = beside / alone
		}
	}
	rd, spin := ratio["p0-t-stream:t_rd"], ratio["p0-t-stream:t_spin"]
	if rd < 2.5 || spin < 2 {
		t.Errorf("median beside / alone: reads %.2f (want 2.5 or more), spins %.2f (want 2 or more)", rd, spin)
	}
}

// TestOverlapOthers: a record overlaps another pod's when their spans intersect (touching
// ends do not), whichever started first; a pod's own records never count.
func TestOverlapOthers(t *testing.T) {
	recs := []podRec{
		{0, 10, "a", "a:k"},  // contains b's first
		{2, 4, "b", "b:k"},   // inside a's first
		{10, 12, "b", "b:k"}, // touches a's first only
		{20, 30, "a", "a:k"}, // overlaps a's own next only
		{25, 40, "a", "a:k"},
		{35, 50, "b", "b:k"}, // starts inside a's last
	}
	want := []bool{true, true, false, false, true, true}
	if got := overlapOthers(recs); !slices.Equal(got, want) {
		t.Errorf("overlapOthers = %v, want %v", got, want)
	}
}

// TestNarrowBurstyUntracedBesideLongReadsLive replays run FX's live tap recording of the
// tune set's `ts4l-t:3` (t-long, t-tensor and t-stream traced, the narrow bursty t-nibble truly
// untraced; one NVIDIA H200, 8 s a process) and checks issue 31's targets: each traced pod
// within 5 %, the untraced class within 15 %. The long reads' records span the turns of the
// untraced process, so only the rotation told them apart, and t-nibble read +18.8 % (−27.1 to
// −7.6 % in runs FS and FT); a whole turn's DRAM read rate against what the traced kernels
// there are known to read (turnSamples.Likelihood) brings it to +4.7 %.
func TestNarrowBurstyUntracedBesideLongReadsLive(t *testing.T) {
	known := map[string]float64{"p0-t-long": 10957120339968, "p1-t-tensor": 2085523292160, "p2-t-stream": 7206063439872}
	snap, _, err := replay("testdata/rec-ts4l-t_3-h200.rec.gz", nil, "rate", 1)
	if err != nil {
		t.Fatal(err)
	}
	checkTargets(t, snap, known, "(untraced) t-nibble", 859844198400)
}
