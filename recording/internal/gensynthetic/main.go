// Command gensynthetic writes a synthetic recording: the two-GPU demo workload, or with
// -gpus a node of that many GPUs, -pods traced pods and -kernel-names distinct kernel names
// (demo.NodeSpec; the sizing guide's busy node is -gpus 8 -pods 30 -kernel-names 5000), or
// with -training the training node of docs/training.md (demo.TrainingNode: job "pretrain",
// two ranks, rank 1 computing -slowdown longer from -slow-from on, and the balanced job
// "finetune", two ranks).
//
//	go run ./recording/internal/gensynthetic -o synthetic.cuptirec
//	go run ./recording/internal/gensynthetic -o node.cuptirec -gpus 8 -pods 30 -kernel-names 5000
//	go run ./recording/internal/gensynthetic -o training.cuptirec -training -slowdown 0.1
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

func main() {
	out := flag.String("o", "synthetic.cuptirec", "output file")
	tsv := flag.String("catalog", "testdata/gh100_pm_sampling_base_metrics.tsv", "GH100 PM-sampling catalog")
	var node demo.NodeSpec
	flag.IntVar(&node.GPUs, "gpus", 0, "GPUs of a generated node (0: the two-GPU demo workload)")
	flag.IntVar(&node.Pods, "pods", 0, "traced pods of the node, one process each, spread over the GPUs")
	flag.IntVar(&node.KernelNames, "kernel-names", 0, "distinct kernel names the node's pods launch")
	flag.DurationVar(&node.Duration, "duration", 0, "length of the node or training recording (default 1m)")
	training := flag.Bool("training", false, "the training node: job pretrain with a slowed rank, job finetune balanced")
	slowdown := flag.Float64("slowdown", demo.TrainingNode.Jobs[0].Slowdown, "with -training: how much longer pretrain's rank 1 computes (0: balanced)")
	slowFrom := flag.Duration("slow-from", 0, "with -training: when pretrain's rank 1 starts to compute longer")
	flag.Parse()
	f, err := os.Create(*out)
	if err == nil { // the recording writer closes f
		switch {
		case *training:
			spec := demo.TrainingNode
			spec.Jobs = append([]demo.TrainingJob(nil), spec.Jobs...)
			spec.Jobs[0].Slowdown, spec.Jobs[0].SlowFrom, spec.Duration = *slowdown, *slowFrom, node.Duration
			err = demo.GenerateTraining(f, *tsv, spec)
		case node.GPUs > 0:
			err = demo.GenerateNode(f, *tsv, node)
		default:
			err = demo.Generate(f, *tsv)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensynthetic:", err)
		os.Exit(1)
	}
}
