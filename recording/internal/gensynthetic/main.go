// Command gensynthetic writes the synthetic demo recording.
//
//	go run ./recording/internal/gensynthetic -o recording/demo/demo.cuptirec
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

func main() {
	out := flag.String("o", "recording/demo/demo.cuptirec", "output file")
	tsv := flag.String("catalog", "testdata/gh100_pm_sampling_base_metrics.tsv", "GH100 PM-sampling catalog")
	flag.Parse()
	f, err := os.Create(*out)
	if err == nil {
		err = demo.Generate(f, *tsv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensynthetic:", err)
		os.Exit(1)
	}
}
