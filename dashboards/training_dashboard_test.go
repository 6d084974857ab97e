package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// This file builds training.json (docs/training.md), registered with the other dashboards in
// all. Its panels read the records of the chart's training rules (prometheusRule.training):
// the ranks of a job side by side, the straggler, where each rank's time goes, the tensor pipe.

func init() {
	all = append(all, struct {
		file  string
		build func() *dashboard.DashboardBuilder
	}{"training.json", training})
}

// Why the training panels are empty where they are, shown in place of "No data".
const (
	noStraggler = "No straggler: the ranks of every job wait alike"
	noJob       = "No training job: needs the chart's training rules and kube-state-metrics exporting a job label (docs/training.md)"
)

func training() *dashboard.DashboardBuilder {
	const rec = "training_job_rank:cupti_communication_wait:ratio_rate5m"
	d := newDashboard("cupti-training", "CUPTI / Distributed training",
		"The ranks of each training job side by side: where each rank's GPU time goes (compute, collective communication, copies, idle), which rank the others wait for, and the tensor pipe per job and rank. Reads the chart's training recording rules (prometheusRule.training) over kube-state-metrics' job labels; docs/training.md.").
		WithVariable(labelVar("training_job", "Job", `label_values(`+rec+`{cluster=~"$cluster", instance=~"$instance"}, training_job)`, true)).
		WithVariable(labelVar("gpu", "GPU", `label_values(`+rec+`{cluster=~"$cluster", instance=~"$instance", training_job=~"$training_job"}, uuid)`, true))
	rankSel := nodeSel + `, training_job=~"$training_job", uuid=~"$gpu"`
	jobSel := `cluster=~"$cluster", training_job=~"$training_job"`
	const rankLegend = "{{training_job}} {{namespace}}/{{pod}} GPU {{gpu}}"
	const waitNote = " The communication wait is the share of a rank's traced time in which its GPU ran collective-communication kernels (NCCL and the libraries of docs/training.md) and no compute kernel: in a synchronous job, mostly time spent waiting for the other ranks."

	d.WithRow(dashboard.NewRowBuilder("Straggler"))
	d.WithPanel(table.NewPanelBuilder().Title("Straggler").
		Description("The rank each job waits for now: the one whose communication wait is the lowest of its job while the job's other ranks wait more, on average, by more than the chart's prometheusRule.training.waitGap (5 points of time by default). CuptiTrainingStraggler fires once that held for prometheusRule.training.for (10 minutes)." + waitNote).
		Datasource(ds).Span(24).Height(6).Unit("percentunit").NoValue(noStraggler).
		WithTarget(instantTable(`sort_desc(training_job_rank:cupti_straggler_gap:ratio_rate5m{` + rankSel + `})`)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]any{"Time": true, "__name__": true},
			"renameByName":  map[string]any{"Value": "The others wait more by", "training_job": "Job"},
		}}))
	d.WithPanel(bargauge.NewPanelBuilder().Title("Communication wait by rank").
		Description("Each rank's communication wait now (5-minute rate), side by side: the straggler waits least, the others wait for it." + waitNote).
		Datasource(ds).Span(8).Height(8).Unit("percentunit").Min(0).Max(1).NoValue(noJob).
		Orientation(common.VizOrientationHorizontal).DisplayMode(common.BarGaugeDisplayModeGradient).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(prometheus.NewDataqueryBuilder().Expr(`sort(` + rec + `{` + rankSel + `})`).LegendFormat(rankLegend).Instant().RefId("A")))
	d.WithPanel(series("Communication wait over time", "Each rank's communication wait (5-minute rate)."+waitNote, "percentunit", 8,
		query(rec+`{`+rankSel+`}`, rankLegend)).NoValue(noJob))
	d.WithPanel(series("How much more the others wait", "For each rank, the mean communication wait of its job's other ranks minus its own: positive for ranks the others wait for. The straggler is the rank with the largest gap, when it is over the threshold.", "percentunit", 8,
		query(`training_job_rank:cupti_communication_wait_gap:ratio_rate5m{`+rankSel+`}`, rankLegend)).Min(-1).NoValue(noJob))

	stacked := common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)
	const stateNote = " compute: compute kernels ran (no collective); communication: only collective kernels; overlap: both (communication hidden behind compute); copy: only copies and fills; idle: none of the rank's work. Shares of the traced time (the injection library's coverage)."
	d.WithRow(dashboard.NewRowBuilder("Where the time goes"))
	d.WithPanel(series("Time by state, per job", "Share of the traced time of the job's ranks (mean over its ranks) in each state."+stateNote, "percentunit", 12,
		query(`training_job_state:cupti_pod_time:ratio_rate5m{`+jobSel+`}`, "{{training_job}} {{state}}")).Stacking(stacked).NoValue(noJob))
	d.WithPanel(series("Time by state, per rank", "Share of each rank's traced time in each state."+stateNote, "percentunit", 12,
		query(`training_job_rank_state:cupti_pod_time:ratio_rate5m{`+rankSel+`}`, rankLegend+" {{state}}")).Stacking(stacked).NoValue(noJob))
	d.WithPanel(series("Time by state, per pod and GPU", "Seconds per second of each pod's traced processes on each GPU in each state (cupti_pod_time_seconds_total), with or without a job label: 1 is a process traced all the time."+stateNote, "percentunit", 24,
		query(`sum by (namespace, pod, gpu, state) (rate(cupti_pod_time_seconds_total{`+nodeSel+`, uuid=~"$gpu"}[$__rate_interval]))`, "{{namespace}}/{{pod}} GPU {{gpu}} {{state}}")).
		Stacking(stacked))

	const tensorNote = " Tensor pipe active is measured by the GPU's performance monitors (PM sampling), attributed to the pod's kernels by time, over the GPU's sampled time: the measured counterpart of model FLOPs utilisation. It is not FLOPs: a busy pipe cycle at FP8 does more than at BF16, it counts recomputation and padding, and it ignores work outside the tensor pipes (docs/training.md)."
	d.WithRow(dashboard.NewRowBuilder("Tensor pipe"))
	d.WithPanel(series("Tensor pipe active, per job", "Mean over the job's ranks of the tensor pipe's active share of each GPU's sampled time (5-minute rate)."+tensorNote, "percentunit", 12,
		query(`training_job:cupti_tensor_pipe_active:ratio_rate5m{`+jobSel+`}`, "{{training_job}}")).NoValue(noJob))
	d.WithPanel(series("Tensor pipe active, per rank", "Each rank's tensor pipe active share of its GPU's sampled time (5-minute rate): the straggler usually shows the highest, since it waits least."+tensorNote, "percentunit", 12,
		query(`training_job_rank:cupti_tensor_pipe_active:ratio_rate5m{`+rankSel+`}`, rankLegend)).NoValue(noJob))
	return d
}
