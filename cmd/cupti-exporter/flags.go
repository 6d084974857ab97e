package main

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cupti-exporter/cupti-exporter/internal/settings"
	"github.com/cupti-exporter/cupti-exporter/pipeline"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
)

// cli holds what the command line says beyond Config: the command and its arguments.
type cli struct {
	configFile string
	demo       bool
	log        promslog.Config

	replay pipeline.ReplayArgs

	record pipeline.RecordArgs

	metricsChip   string
	describeName  string
	planMetrics   string
	planMultiplex bool
	chips         chipsFlags

	webhook webhookFlags
}

// Command names as kingpin reports them.
const (
	cmdServe    = "serve"
	cmdReplay   = "replay"
	cmdRecord   = "record"
	cmdList     = "metrics list"
	cmdDescribe = "metrics describe"
	cmdPlan     = "metrics plan"
	cmdVersion  = "version"
)

// newApp builds the command line over cfg: every Config leaf becomes a flag whose default
// is its current value (so a YAML file read into cfg first sets the defaults flags override).
func newApp(cfg *pipeline.Config, stdout, stderr io.Writer) (*kingpin.Application, *cli) {
	c := &cli{log: promslog.Config{}}
	app := kingpin.New("cupti-exporter", "Exports NVIDIA CUPTI PM Sampling device counters and Activity API kernel/memcpy records as Prometheus and OTLP metrics.")
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	app.Version(version.Print("cupti-exporter"))
	app.HelpFlag.Short('h')

	app.Flag("config.file", "YAML configuration file (keys as in docs/configuration.md); flags override it.").PlaceHolder("FILE").StringVar(&c.configFile)
	app.Flag("demo", "Serve the embedded demo recording, looping; needs no GPU.").BoolVar(&c.demo)
	addConfigFlags(app, reflect.ValueOf(cfg).Elem(), "")
	promslogflag.AddFlags(app, &c.log)

	app.Command(cmdServe, "Serve metrics from the GPUs of this host (the default command).").Default()

	replay := app.Command(cmdReplay, "Serve metrics from a recording instead of the GPUs.")
	replay.Arg("file", "Recording made with `record`.").Required().StringVar(&c.replay.File)
	replay.Flag("replay.speed", "Replay speed: 1 is real time, 10 ten times faster.").Default("1").Float64Var(&c.replay.Speed)
	replay.Flag("replay.loop", "Start over at the end of the recording.").BoolVar(&c.replay.Loop)

	record := app.Command(cmdRecord, "Record PM samples, activity records and NVML health to a file, for replay.")
	record.Flag("output", "File to write.").Required().PlaceHolder("FILE").StringVar(&c.record.Output)
	record.Flag("duration", "How long to record.").Default("60s").DurationVar(&c.record.Duration)
	record.Flag("max-size", "Stop recording when the file reaches this size (e.g. 512MiB; 0: no limit). A flood of activity records writes over 100 MB/s.").
		Default("1GiB").SetValue((*byteSizeValue)(&c.record.MaxSize))

	metrics := app.Command("metrics", "Inspect the PM Sampling metric catalog.")
	metrics.Flag("chip", "Chip whose catalog to read (e.g. GH100, needs libcupti but no GPU) or a CUDA ordinal.").Default("0").IsSetByUser(&c.chips.chipSet).StringVar(&c.metricsChip)
	metrics.Command("list", "List the metrics that can be sampled.")
	describe := metrics.Command("describe", "Describe a metric: properties and the exported name.")
	describe.Arg("name", "Perfworks metric name.").Required().StringVar(&c.describeName)
	plan := metrics.Command("plan", "Show how metrics pack into single-pass groups.")
	plan.Arg("metrics", "Comma-separated Perfworks metric names.").Required().StringVar(&c.planMetrics)
	plan.Flag("multiplex", "Plan several single-pass groups instead of dropping what does not fit.").BoolVar(&c.planMultiplex)
	addChipsCommand(metrics, c)

	addWebhookCommand(app, &c.webhook)
	app.Command(cmdVersion, "Print the version.")
	return app, c
}

// addConfigFlags registers one flag per leaf of the struct v (yaml path prefix).
func addConfigFlags(app *kingpin.Application, v reflect.Value, prefix string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, inline := yamlKey(f, prefix)
		fv := v.Field(i)
		switch {
		case inline:
			addConfigFlags(app, fv, prefix)
			continue
		case f.Type.Kind() == reflect.Struct:
			addConfigFlags(app, fv, key+".")
			continue
		}
		fl := app.Flag(flagName(f, key), f.Tag.Get("help"))
		switch p := fv.Addr().Interface().(type) {
		case *string:
			fl.Default(*p).StringVar(p)
		case *bool:
			fl.Default(fmt.Sprint(*p)).BoolVar(p)
		case *int:
			fl.Default(strconv.Itoa(*p)).IntVar(p)
		case *float64:
			fl.Default(strconv.FormatFloat(*p, 'g', -1, 64)).Float64Var(p)
		case *settings.Duration:
			fl.Default(p.String()).SetValue((*durationValue)(p))
		case *settings.ByteSize:
			fl.Default(p.String()).SetValue((*byteSizeValue)(p))
		case *[]string:
			fl.Default(strings.Join(*p, ",")).SetValue((*listValue)(p))
		case *map[string]string:
			var defs []string
			for k, val := range *p {
				defs = append(defs, k+"="+val)
			}
			sort.Strings(defs)
			fl.PlaceHolder("NAME=VALUE").Default(defs...).SetValue((*mapValue)(p))
		default:
			panic(fmt.Sprintf("config field %s: unsupported type %s", key, f.Type))
		}
	}
}

// yamlKey is the dotted YAML key of field f under prefix; inline is set for a struct whose
// fields belong to the section that holds it (`yaml:",inline"`: the pmsample section is made
// of pmsample's, idle's and profilers' parts).
func yamlKey(f reflect.StructField, prefix string) (key string, inline bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return prefix + name, opts == "inline" && f.Type.Kind() == reflect.Struct
}

// flagName is the flag of a Config leaf with YAML key key.
func flagName(f reflect.StructField, key string) string {
	if n := f.Tag.Get("flag"); n != "" {
		return n
	}
	return strings.ReplaceAll(key, "_", "-")
}

// configFlags maps the flag names of Config leaves to their dotted YAML keys.
func configFlags(t reflect.Type, prefix string, out map[string]string) map[string]string {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, inline := yamlKey(f, prefix)
		switch {
		case inline:
			configFlags(f.Type, prefix, out)
			continue
		case f.Type.Kind() == reflect.Struct:
			configFlags(f.Type, key+".", out)
			continue
		}
		out[flagName(f, key)] = key
	}
	return out
}

type durationValue settings.Duration

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: want a number with a unit (us, ms, s, m, h), e.g. 250ms", s)
	}
	*d = durationValue(v)
	return nil
}
func (d *durationValue) String() string { return settings.Duration(*d).String() }

type byteSizeValue settings.ByteSize

func (b *byteSizeValue) Set(s string) error {
	v, err := settings.ParseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSizeValue(v)
	return nil
}
func (b *byteSizeValue) String() string { return settings.ByteSize(*b).String() }

type listValue []string

func (l *listValue) Set(s string) error {
	*l = nil
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			*l = append(*l, x)
		}
	}
	return nil
}
func (l *listValue) String() string { return strings.Join(*l, ",") }

type mapValue map[string]string

func (m *mapValue) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", s)
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[k] = v
	return nil
}
func (m *mapValue) String() string {
	var kv []string
	for k, v := range *m {
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
func (m *mapValue) IsCumulative() bool { return true }
