package helm

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// trainingGroup is the rule group of prometheusRule.training (docs/training.md).
const trainingGroup = "cupti-exporter.training"

// trainingRecord is the naming of the training group's records: level:metric:operations where
// the level is training_job, training_job_rank (a rank: namespace, pod, node, instance, gpu,
// uuid), either with _state, or namespace_pod for the job of each pod.
var trainingRecord = regexp.MustCompile(`^(training_job(_rank)?(_state)?|namespace_pod):(cupti_[a-z0-9_]+):[a-z0-9_]+$`)

// rankLabels are the labels of a rank, as the training records keep them.
var rankLabels = []string{"cluster", "namespace", "pod", "node", "instance", "gpu", "uuid"}

// TestTrainingRules checks the distributed-training group: on by default with the alert rules,
// off with training.enabled false; its records named as trainingRecord says, each an instant
// vector that keeps cluster; the job of a pod taken from each of jobLabels in order; the
// straggler threshold and for from the values.
func TestTrainingRules(t *testing.T) {
	group := func(groups []ruleGroup) *ruleGroup {
		for i := range groups {
			if groups[i].Name == trainingGroup {
				return &groups[i]
			}
		}
		return nil
	}
	ms, _ := render(t, "prometheusRule: {enabled: true}\nserviceMonitor: {enabled: true}\n")
	g := group(decodeStrict(t, find(t, ms, "PrometheusRule")).(*prometheusRule).Spec.Groups)
	if g == nil {
		t.Fatal("no training group with the default values")
	}
	if group(renderRules(t, ", training: {enabled: false}")) != nil {
		t.Error("training group rendered with training.enabled false")
	}
	var alerts []string
	for _, r := range g.Rules {
		if r.Alert != "" {
			alerts = append(alerts, r.Alert)
			continue
		}
		m := trainingRecord.FindStringSubmatch(r.Record)
		if m == nil {
			t.Errorf("%s: not named as the training records are", r.Record)
			continue
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
		if err != nil || expr.Type() != parser.ValueTypeVector {
			t.Errorf("%s: expr %q: %v; want an instant vector", r.Record, r.Expr, err)
			continue
		}
		var groupings [][]string // of every aggregation by labels, at any depth
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			if a, ok := n.(*parser.AggregateExpr); ok && !a.Without {
				groupings = append(groupings, a.Grouping)
			}
			return nil
		})
		keepsRank := false
		for _, by := range groupings {
			if !slices.Contains(by, "cluster") {
				t.Errorf("%s: aggregates by %v without cluster: a central Prometheus would merge clusters", r.Record, by)
			}
			keepsRank = keepsRank || !slices.ContainsFunc(rankLabels, func(l string) bool { return !slices.Contains(by, l) })
		}
		// A rank record that reads the exporter's families keeps every label of a rank.
		if strings.HasPrefix(r.Record, "training_job_rank") && strings.Contains(r.Expr, "rate(") && !keepsRank {
			t.Errorf("%s: no aggregation keeps all of the rank's labels %v", r.Record, rankLabels)
		}
	}
	if !slices.Equal(alerts, []string{"CuptiTrainingStraggler"}) {
		t.Errorf("alerts of the training group %v; want CuptiTrainingStraggler", alerts)
	}

	// jobLabels: each one read, first found wins; waitGap and for from the values.
	g = group(renderRules(t, ", training: {jobLabels: [label_a, label_b_c], waitGap: 0.1, for: 3m, interval: 20s}"))
	if g == nil || g.Interval != "20s" {
		t.Fatalf("training group with custom values: %+v", g)
	}
	for _, r := range g.Rules {
		switch {
		case r.Record == "namespace_pod:cupti_training_job:kube_pod_labels":
			a := strings.Index(r.Expr, `kube_pod_labels{label_a!=""}, "training_job", "$1", "label_a"`)
			b := strings.Index(r.Expr, `kube_pod_labels{label_b_c!=""}, "training_job", "$1", "label_b_c"`)
			if a < 0 || b < a || !strings.Contains(r.Expr, "or on (cluster, namespace, pod)") {
				t.Errorf("job of a pod %q: want label_a, else label_b_c", r.Expr)
			}
		case r.Record == "training_job_rank:cupti_straggler_gap:ratio_rate5m":
			if !strings.Contains(r.Expr, "> 0.1") {
				t.Errorf("straggler record %q: want the threshold 0.1", r.Expr)
			}
		case r.Alert == "CuptiTrainingStraggler":
			if r.For != "3m" {
				t.Errorf("alert for %q; want 3m", r.For)
			}
		}
	}
	if _, err := renderYAML(t, loadChart(t), "prometheusRule: {training: {jobLabels: [jobset.sigs.k8s.io/jobset-name]}}"); err == nil {
		t.Error("a pod label name instead of kube_pod_labels' label_ name was accepted")
	}
}
