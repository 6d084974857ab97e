package exporter

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

var goldenNames = []string{
	"cupti_kernel_duration_seconds", "cupti_memcpy_size_bytes", "cupti_pcie_bytes_total",
	"cupti_sm_active_ratio", "cupti_exporter_source_up", "cupti_exporter_series_dropped_total",
}

func newTestExporter(opts ...Option) *Exporter {
	e := New(nil, append([]Option{WithoutRuntimeMetrics()}, opts...)...)
	e.Register("pmsample", newFakeProducer(pmSnapshot()))
	e.Register("activity", newFakeProducer(activitySnapshot()))
	e.RegisterStatus("pmsample", fakeStatus{
		{Source: "pmsample", Device: "0", Ready: true},
		{Source: "pmsample", Device: "1", Reason: "hardware busy: paused for ncu"},
	})
	e.RegisterStatus("activity", fakeStatus{{Ready: true}}) // Source defaults to the registered name
	return e
}

func compareGolden(t *testing.T, e *Exporter, file string, names ...string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(partial(e.Registry()), f, names...); err != nil {
		t.Error(err)
	}
}

// partial gathers what g can, ignoring the errors (as promhttp.ContinueOnError serves).
func partial(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, _ := g.Gather()
		return mfs, nil
	})
}

func TestCollectGolden(t *testing.T) {
	compareGolden(t, newTestExporter(), "testdata/collect.txt", goldenNames...)
}

func TestCollectLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(&collector{e: newTestExporter()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestRegistrySelfMetrics(t *testing.T) {
	mfs, err := newTestExporter().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		got[mf.GetName()] = mf
	}
	info := got["cupti_exporter_build_info"]
	if info == nil {
		t.Fatal("no cupti_exporter_build_info")
	}
	labels := map[string]bool{}
	for _, l := range info.Metric[0].Label {
		labels[l.GetName()] = true
	}
	for _, l := range []string{"version", "revision", "goversion"} {
		if !labels[l] {
			t.Errorf("cupti_exporter_build_info has no %s label", l)
		}
	}
	if d := got["cupti_exporter_collect_duration_seconds"]; d == nil || d.Metric[0].GetGauge().GetValue() <= 0 {
		t.Errorf("cupti_exporter_collect_duration_seconds = %v, want a positive gauge", d)
	}
	if got["go_goroutines"] != nil {
		t.Error("go_goroutines present with WithoutRuntimeMetrics")
	}
	mfs, err = New(nil).Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(mfs, func(mf *dto.MetricFamily) bool { return mf.GetName() == "go_goroutines" }) {
		t.Error("go_goroutines missing from the default registry")
	}
}

func TestCollectSkipsProducerWithoutSnapshot(t *testing.T) {
	e := newTestExporter()
	e.Register("idle", &fakeProducer{}) // nil snapshot: not started yet
	compareGolden(t, e, "testdata/collect.txt", goldenNames...)
}

func TestDeviceLabeler(t *testing.T) {
	var calls atomic.Int32
	e := newTestExporter(WithDeviceLabeler(DeviceLabelerFunc(func(uuid string) (string, string, string) {
		calls.Add(1)
		if uuid == "GPU-aaaa" {
			return "train-0", "ml", "trainer"
		}
		return "", "", ""
	})))
	// A family that already has a pod label is left alone.
	podDesc := &snapshot.Desc{Name: "cupti_test_pod_info", Help: "x", Kind: snapshot.KindGauge, LabelNames: []string{"uuid", "pod"}}
	e.Register("other", newFakeProducer(&snapshot.Snapshot{Families: []snapshot.Family{
		{Desc: podDesc, Samples: []snapshot.Sample{{LabelValues: []string{"GPU-aaaa", "p"}, Value: 1}}},
	}}))
	compareGolden(t, e, "testdata/attributed.txt",
		"cupti_kernel_duration_seconds", "cupti_memcpy_size_bytes", "cupti_sm_active_ratio")
	const want = `# HELP cupti_test_pod_info x
# TYPE cupti_test_pod_info gauge
cupti_test_pod_info{pod="p",uuid="GPU-aaaa"} 1
`
	if err := testutil.GatherAndCompare(e.Registry(), strings.NewReader(want), "cupti_test_pod_info"); err != nil {
		t.Error(err)
	}
	// The pmsample snapshot is attributed per gather; uuids are looked up once per snapshot.
	calls.Store(0)
	if _, err := e.Registry().Gather(); err != nil {
		t.Fatal(err)
	}
	if got := calls.Load(); got != 4 { // pmsample: aaaa, bbbb; activity: aaaa, cccc
		t.Errorf("labeler called %d times per gather, want 4", got)
	}
}

// TestPodLabelsWithoutLabeler: without a device labeler (no pod-resources), device series
// still carry pod, namespace and container, empty. A Prometheus scraping with
// honor_labels keeps an exposed empty label empty; an absent one would get the exporter
// pod's target label, crediting every GPU to the exporter.
func TestPodLabelsWithoutLabeler(t *testing.T) {
	mfs, err := partial(newTestExporter().Registry()).Gather()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]*string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.Value
			}
			if labels["uuid"] == nil {
				continue
			}
			checked++
			for _, k := range []string{"pod", "namespace", "container"} {
				if v, ok := labels[k]; !ok || *v != "" {
					t.Errorf("%s %v: label %s missing or not empty", mf.GetName(), m.GetLabel(), k)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no series with a uuid label gathered")
	}
}

func TestCollectReportsDuplicatesAndConflicts(t *testing.T) {
	e := newTestExporter()
	// The same device series again, and a family of the same name with other labels.
	e.Register("again", newFakeProducer(&snapshot.Snapshot{Families: []snapshot.Family{
		{Desc: smActive, Samples: []snapshot.Sample{{LabelValues: dev("0", "GPU-aaaa"), Value: 0.9}}},
		{Desc: &snapshot.Desc{Name: "cupti_pcie_bytes_total", Help: "other", Kind: snapshot.KindGauge, LabelNames: []string{"gpu"}},
			Samples: []snapshot.Sample{{LabelValues: []string{"0"}, Value: 1}, {LabelValues: []string{"1"}, Value: 2}}},
		{Desc: memcpySize, Samples: []snapshot.Sample{{LabelValues: []string{"dtoh"}, Histogram: &snapshot.HistogramValue{
			Count: 1, Bounds: []float64{1}, Cumulative: []uint64{1}, Native: true, Schema: 9}}}},
	}}))
	_, err := e.Registry().Gather()
	if err == nil {
		t.Fatal("gather succeeded, want errors for the duplicate, the conflict and the bad schema")
	}
	for _, want := range []string{
		`duplicate label set {gpu="0",uuid="GPU-aaaa"`,
		"merge family cupti_pcie_bytes_total: gauge with labels [gpu] conflicts with counter",
		"schema 9 outside [-4, 8]",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("gather error lacks %q:\n%v", want, err)
		}
	}
	// Everything else is still served, with the first series of a label set kept.
	compareGolden(t, e, "testdata/collect.txt", "cupti_sm_active_ratio", "cupti_pcie_bytes_total", "cupti_kernel_duration_seconds")
	const drops = `# HELP cupti_exporter_series_dropped_total Series not exported because their family conflicts with another of the same name, their label set repeats, their values are invalid, or their family passed the series limit (cardinality).
# TYPE cupti_exporter_series_dropped_total counter
cupti_exporter_series_dropped_total{outlet="prometheus",reason="cardinality"} 0
cupti_exporter_series_dropped_total{outlet="prometheus",reason="conflict"} 6
cupti_exporter_series_dropped_total{outlet="prometheus",reason="duplicate"} 3
cupti_exporter_series_dropped_total{outlet="prometheus",reason="invalid"} 3
`
	// Third gather: each one drops 2 conflicting, 1 duplicate and 1 invalid series.
	if err := testutil.GatherAndCompare(partial(e.Registry()), strings.NewReader(drops), "cupti_exporter_series_dropped_total"); err != nil {
		t.Error(err)
	}
}

func TestCollectConcurrentSafe(t *testing.T) {
	e := New(nil)
	p := newFakeProducer(pmSnapshot())
	e.Register("pmsample", p)
	e.Register("activity", newFakeProducer(activitySnapshot()))
	e.RegisterStatus("pmsample", fakeStatus{{Source: "pmsample", Device: "0", Ready: true}})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // the source swaps snapshots as fast as it can
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s := pmSnapshot()
			s.Families[0].Samples[0].Value = float64(i)
			p.p.Store(s)
		}
	})
	errs := make(chan error, 8)
	var scrapers sync.WaitGroup
	for range 4 {
		scrapers.Go(func() {
			for range 50 {
				if _, err := e.Registry().Gather(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	scrapers.Go(func() {
		for range 50 {
			e.Register("late", newFakeProducer(pmSnapshot()))
			e.Register("late", newFakeProducer(nil))
		}
	})
	scrapers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		// "late" briefly duplicates pmsample's series; nothing else may fail.
		if !strings.Contains(err.Error(), "duplicate label set") {
			t.Error(err)
		}
	}
}

// A family past maxSeriesPerFamily keeps limit-1 series and folds the rest, counted, into
// one overflow series that sums them.
func TestMergeCapsSeriesPerFamily(t *testing.T) {
	f := snapshot.Family{Desc: smActive}
	for i := range maxSeriesPerFamily + 10 {
		f.Samples = append(f.Samples, snapshot.Sample{LabelValues: dev(strconv.Itoa(i), "GPU-x"), Value: 1})
	}
	fams, problems := merge([]*snapshot.Snapshot{{Time: testTime, Families: []snapshot.Family{f}}})
	if len(fams) != 1 || len(fams[0].series) != maxSeriesPerFamily {
		t.Fatalf("kept %d series, want %d", len(fams[0].series), maxSeriesPerFamily)
	}
	over := fams[0].series[maxSeriesPerFamily-1].sample
	if over.LabelValues[0] != overflowLabel || over.Value != 11 {
		t.Errorf("overflow series %q = %v, want every label %q and 11", over.LabelValues, over.Value, overflowLabel)
	}
	if len(problems) != 1 || problems[0].reason != dropCardinality || problems[0].series != 11 {
		t.Fatalf("problems = %+v, want one cardinality problem of 11 series", problems)
	}
}

// The cap folds claimed identities before verified ones and never a GPU's own series, and
// the overflow histogram adds up the folded ones.
func TestCapPriority(t *testing.T) {
	desc := &snapshot.Desc{Name: "x_seconds", Kind: snapshot.KindHistogram, LabelNames: []string{"gpu", "pod"}}
	f := &family{desc: desc}
	add := func(gpu, pod string, p snapshot.Priority) {
		h := &snapshot.HistogramValue{Count: 2, Sum: 1, Bounds: []float64{0.1, 1}, Cumulative: []uint64{1, 2}}
		f.series = append(f.series, series{sample: &snapshot.Sample{LabelValues: []string{gpu, pod}, Histogram: h, Priority: p}})
	}
	for i := range 5 { // claimed first in label order, as "aa..." pods would be
		add("0", "aa-claimed-"+strconv.Itoa(i), snapshot.PriorityClaimed)
	}
	add("0", "zz-legit", snapshot.PriorityVerified)
	add("0", "zz-other", snapshot.PriorityNormal)
	for i := range 4 {
		add(strconv.Itoa(i), "", snapshot.PriorityDevice)
	}
	if n := f.capSeries(6); n != 6 {
		t.Fatalf("folded %d, want 6 (the 5 claimed and the normal one)", n)
	}
	var kept []string
	for _, s := range f.series {
		kept = append(kept, s.sample.LabelValues[0]+"/"+s.sample.LabelValues[1])
	}
	if got, want := strings.Join(kept, ","), "0/,1/,2/,3/,0/zz-legit,(overflow)/(overflow)"; got != want {
		// every device series stays even past the limit; the verified pod is next
		t.Errorf("kept %s, want %s", got, want)
	}
	o := f.series[len(f.series)-1].sample.Histogram
	if o.Count != 12 || o.Sum != 6 || !slices.Equal(o.Cumulative, []uint64{6, 12}) {
		t.Errorf("overflow histogram %+v, want 6 folded histograms added up", o)
	}
}

// Through the registry: a flood of claimed series does not hide a device's series or a
// verified pod's, the overflow series is served without a scrape error, and the fold is
// counted.
func TestCapThroughRegistry(t *testing.T) {
	e := New(nil)
	work := snapshot.Family{Desc: &snapshot.Desc{Name: "cupti_kernel_gpu_seconds_total", Kind: snapshot.KindCounter,
		LabelNames: []string{"gpu", "uuid", "namespace", "pod", "container"}}}
	for i := range maxSeriesPerFamily + 100 {
		work.Samples = append(work.Samples, snapshot.Sample{LabelValues: []string{"0", "GPU-x", "a", fmt.Sprintf("claimed-%05d", i), "c"},
			Value: 1, Priority: snapshot.PriorityClaimed})
	}
	work.Samples = append(work.Samples, snapshot.Sample{LabelValues: []string{"1", "GPU-y", "zz-prod", "zz-legit", "c"}, Value: 5, Priority: snapshot.PriorityVerified})
	device := snapshot.Family{Desc: smActive}
	for i := range maxSeriesPerFamily + 1 {
		device.Samples = append(device.Samples, snapshot.Sample{LabelValues: dev(strconv.Itoa(i), "GPU-"+strconv.Itoa(i)), Value: 0.5})
	}
	e.Register("flood", newFakeProducer(&snapshot.Snapshot{Time: testTime, Families: []snapshot.Family{work, device}}))
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	if n := len(byName[smActive.Name].GetMetric()); n != maxSeriesPerFamily+1 {
		t.Errorf("%d device series served, want all %d", n, maxSeriesPerFamily+1)
	}
	var legit, overflow bool
	for _, m := range byName["cupti_kernel_gpu_seconds_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			legit = legit || l.GetName() == "pod" && l.GetValue() == "zz-legit"
			overflow = overflow || l.GetName() == "pod" && l.GetValue() == overflowLabel && m.GetCounter().GetValue() == 102
		}
	}
	if !legit || !overflow {
		t.Errorf("verified pod served %v, overflow series of the 102 folded claims %v", legit, overflow)
	}
	for _, m := range byName["cupti_exporter_series_dropped_total"].GetMetric() {
		ls := map[string]string{}
		for _, l := range m.GetLabel() {
			ls[l.GetName()] = l.GetValue()
		}
		if ls["outlet"] == "prometheus" && ls["reason"] == "cardinality" && m.GetCounter().GetValue() != 102 {
			t.Errorf("cardinality drops %v, want 102", m.GetCounter().GetValue())
		}
	}
}
