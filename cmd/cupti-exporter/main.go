// Command cupti-exporter serves NVIDIA CUPTI PM Sampling device counters and Activity API
// kernel/memcpy records as Prometheus metrics and pushes them over OTLP.
//
// See README.md for a quick start and docs/configuration.md for every flag and YAML key.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args and runs the chosen command; it returns the exit code. Every failure is
// one line on stderr naming the cause.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, cl, cmd, err := parse(args, stdout, stderr)
	if err == nil {
		err = dispatch(ctx, cmd, cfg, cl, stdout)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "cupti-exporter: error: %v\n", err)
		return 1
	}
	return 0
}

// parse reads the command line and, with --config.file, the YAML file: the file's values
// become the defaults of a second parse, so flags given explicitly win.
func parse(args []string, stdout, stderr io.Writer) (*Config, *cli, string, error) {
	cfg := defaultConfig()
	app, cl := newApp(&cfg, stdout, stderr)
	cmd, err := app.Parse(args)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w (see --help)", err)
	}
	if cl.configFile != "" {
		cfg = defaultConfig()
		if err := loadConfigFile(cl.configFile, &cfg); err != nil {
			return nil, nil, "", err
		}
		app, cl = newApp(&cfg, stdout, stderr)
		if cmd, err = app.Parse(args); err != nil {
			return nil, nil, "", fmt.Errorf("%w (see --help)", err)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, nil, "", fmt.Errorf("invalid configuration: %w", err)
	}
	return &cfg, cl, cmd, nil
}

func dispatch(ctx context.Context, cmd string, cfg *Config, cl *cli, stdout io.Writer) error {
	logger := promslog.New(&cl.log)
	switch cmd {
	case cmdVersion:
		fmt.Fprintln(stdout, version.Print("cupti-exporter"))
		return nil
	case cmdReplay:
		return runReplay(ctx, logger, cfg, cl)
	case cmdRecord:
		return runRecord(ctx, logger, cfg, cl)
	case cmdList, cmdDescribe, cmdPlan:
		return runMetrics(cmd, logger, cfg, cl, stdout)
	}
	if cl.demo {
		return runDemo(ctx, logger, cfg)
	}
	return runServe(ctx, logger, cfg)
}
