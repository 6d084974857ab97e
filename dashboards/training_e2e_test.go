package dashboards

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// The distributed-training part of the Prometheus end-to-end check (docs/training.md): the
// generated training node (demo.TrainingNode: job "pretrain" whose rank 1 computes 30 %
// longer, and the balanced job "finetune") replayed by the exporter, and a kube-state-metrics
// stand-in serving kube_pod_labels for its pods. The chart's training rules must name
// pretrain-1, and only it, in their straggler record and in CuptiTrainingStraggler (pending:
// its for is longer than the check), and stay quiet on finetune; training.json is judged on
// this replay only.

// ksmPods are the pods the kube-state-metrics stand-in reports, with their uid and the pod
// labels kube-state-metrics exports for them (as kube_pod_labels' label_* labels). They are
// the training replay's pods, a pod without a job label, and the pods of
// helm/cupti-exporter/tests/rules_training_test.yaml, whose input series must have label sets
// and values Prometheus really stores.
var ksmPods = []struct {
	pod, uid string
	labels   [][2]string
}{
	{"pretrain-0", "6f1c2a4e-0001", [][2]string{{"label_batch_kubernetes_io_job_name", "pretrain-workers-0"}, {"label_jobset_sigs_k8s_io_jobset_name", "pretrain"}}},
	{"pretrain-1", "6f1c2a4e-0002", [][2]string{{"label_batch_kubernetes_io_job_name", "pretrain-workers-0"}, {"label_jobset_sigs_k8s_io_jobset_name", "pretrain"}}},
	{"finetune-0", "6f1c2a4e-0003", [][2]string{{"label_training_kubeflow_org_job_name", "finetune"}}},
	{"finetune-1", "6f1c2a4e-0004", [][2]string{{"label_training_kubeflow_org_job_name", "finetune"}}},
	{"notebook-0", "6f1c2a4e-0005", nil},
	{"steady-0", "6f1c2a4e-0011", [][2]string{{"label_job_name", "steady"}, {"label_batch_kubernetes_io_job_name", "steady"}}},
	{"steady-1", "6f1c2a4e-0012", [][2]string{{"label_job_name", "steady"}, {"label_batch_kubernetes_io_job_name", "steady"}}},
	{"solo-0", "6f1c2a4e-0013", [][2]string{{"label_volcano_sh_job_name", "solo"}}},
	{"hung-0", "6f1c2a4e-0014", [][2]string{{"label_volcano_sh_job_name", "hung"}}},
	{"hung-1", "6f1c2a4e-0015", [][2]string{{"label_volcano_sh_job_name", "hung"}}},
	{"dup-0", "6f1c2a4e-0016", [][2]string{{"label_volcano_sh_job_name", "dup"}}},
	{"dup-0", "6f1c2a4e-0017", [][2]string{{"label_volcano_sh_job_name", "dup"}}},
}

// ksmTarget are the target labels kube-prometheus-stack's ServiceMonitor gives
// kube-state-metrics (honorLabels: the series' own namespace and pod win).
var ksmTarget = map[string]string{"job": "kube-state-metrics", "service": "kube-state-metrics", "endpoint": "http",
	"container": "kube-state-metrics", "namespace": "monitoring", "pod": "kube-state-metrics-7c9d8-x2k4q"}

// serveKubeStateMetrics serves kube_pod_labels of ksmPods in the text format, as
// kube-state-metrics does with those pod labels allowlisted.
func serveKubeStateMetrics(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# HELP kube_pod_labels Kubernetes labels converted to Prometheus labels.\n# TYPE kube_pod_labels gauge\n")
	for _, p := range ksmPods {
		fmt.Fprintf(&b, `kube_pod_labels{namespace="ml",pod=%q,uid=%q`, p.pod, p.uid)
		for _, l := range p.labels {
			fmt.Fprintf(&b, `,%s=%q`, l[0], l[1])
		}
		b.WriteString("} 1\n")
	}
	body := b.String()
	return serveHandler(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(body))
	}), nil)
}

// trainingReplays generates the training node's recording, starts its replay (4x, looping)
// and the kube-state-metrics stand-in, and returns them as the check's replays.
func trainingReplays(t *testing.T, dir, bin string) []replay {
	t.Helper()
	ksm := replay{name: "kube-state-metrics", addr: serveKubeStateMetrics(t), only: []string{}, target: ksmTarget}
	rec := filepath.Join(dir, "training.cuptirec")
	f, err := os.Create(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.GenerateTraining(f, "../testdata/gh100_pm_sampling_base_metrics.tsv", demo.TrainingNode); err != nil { // closes f
		t.Fatal(err)
	}
	startProc(t, dir, "training", bin, "replay", rec, "--replay.loop", "--replay.speed=4", "--web.listen-address=127.0.0.1:0",
		"--web.health-listen-address=127.0.0.1:0")
	tr := replay{name: "training", addr: boundAddr(t, dir, "training"), gpus: 4, only: []string{"training.json"}}
	return []replay{tr, ksm}
}

// checkTraining checks what the training rules say of the training replay: the balanced job's
// ranks wait alike, the slowed job's others wait more than its rank 1, and the straggler record
// and CuptiTrainingStraggler name pretrain-1 and nothing else.
func checkTraining(s server, replays []replay) []string {
	var inst string
	for _, r := range replays {
		if r.name == "training" {
			inst = r.addr
		}
	}
	if inst == "" {
		return nil
	}
	var problems []string
	sel := `{instance="` + inst + `"}`
	wait := map[string]float64{}
	res, err := instantQuery(s.url, `training_job_rank:cupti_communication_wait:ratio_rate5m`+sel)
	for _, x := range res {
		if len(x.Value) == 2 {
			v, _ := strconv.ParseFloat(fmt.Sprint(x.Value[1]), 64)
			wait[x.Metric["pod"]] = v
		}
	}
	if err != nil || len(wait) != 4 {
		return []string{fmt.Sprintf("training (%s histograms): communication wait of %d ranks (%v), want the 4 of pretrain and finetune: %v", s.name, len(wait), wait, err)}
	}
	if d := math.Abs(wait["finetune-0"] - wait["finetune-1"]); d > 0.02 {
		problems = append(problems, fmt.Sprintf("training (%s histograms): the balanced job's ranks wait %v, %.3f apart", s.name, wait, d))
	}
	if d := wait["pretrain-0"] - wait["pretrain-1"]; d < 0.1 {
		problems = append(problems, fmt.Sprintf("training (%s histograms): pretrain's rank 0 waits only %.3f more than its slowed rank 1 (%v)", s.name, d, wait))
	}
	named := func(expr string) []string {
		res, err := instantQuery(s.url, expr)
		if err != nil {
			return []string{err.Error()}
		}
		var out []string
		for _, x := range res {
			out = append(out, x.Metric["training_job"]+"/"+x.Metric["pod"])
		}
		sort.Strings(out)
		return out
	}
	for _, q := range []struct{ what, expr string }{
		{"straggler record", `training_job_rank:cupti_straggler_gap:ratio_rate5m` + sel},
		{"CuptiTrainingStraggler", `ALERTS{alertname="CuptiTrainingStraggler", instance="` + inst + `"}`},
	} {
		if got := named(q.expr); len(got) != 1 || got[0] != "pretrain/pretrain-1" {
			problems = append(problems, fmt.Sprintf("training (%s histograms): %s names %v, want pretrain/pretrain-1 alone", s.name, q.what, got))
		}
	}
	res, err = instantQuery(s.url, `training_job:cupti_tensor_pipe_active:ratio_rate5m`)
	for _, x := range res {
		if v, _ := strconv.ParseFloat(fmt.Sprint(x.Value[1]), 64); v <= 0 || v > 1 {
			problems = append(problems, fmt.Sprintf("training (%s histograms): tensor pipe share %v of job %s outside (0, 1]", s.name, v, x.Metric["training_job"]))
		}
	}
	if err != nil || len(res) != 2 {
		problems = append(problems, fmt.Sprintf("training (%s histograms): tensor pipe share of %d jobs, want 2: %v", s.name, len(res), err))
	}
	return problems
}
