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
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cupti-exporter/cupti-exporter/pipeline"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/common/version"
)

func main() {
	// A closed pipe on stdout or stderr (`cupti-exporter serve | head`) would otherwise end
	// the exporter with SIGPIPE (exit 141), leaving its socket file: writes fail instead.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := notifyShutdown(context.Background())
	signal.Notify(hangups, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// shutdownSignals end the exporter cleanly (the activity socket file is removed); a second
// one ends it at once.
var shutdownSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGQUIT}

// hangups receives SIGHUP, which the exporter logs and otherwise ignores: its configuration
// is read once at start (restart it to apply a change), as node_exporter's is.
var hangups = make(chan os.Signal, 1)

// notifyShutdown returns a context cancelled, with the signal as its cause, by the first
// shutdown signal; the next one gets Go's default action (exit).
func notifyShutdown(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, shutdownSignals...)
	go func() {
		select {
		case s := <-ch:
			signal.Reset(shutdownSignals...)
			cancel(fmt.Errorf("received %s: %w", s, context.Canceled))
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(ch); cancel(nil) }
}

// logSignals logs the shutdown signal and every SIGHUP until ctx ends. A ctx derived from
// the shutdown context carries the signal as its cause when the signal ended it.
func logSignals(ctx context.Context, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
				logger.Info("shutting down", "reason", cause)
			}
			return
		case s := <-hangups:
			logger.Warn("ignoring signal: configuration reload is not supported; restart the exporter to apply a new configuration", "signal", s)
		}
	}
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
func parse(args []string, stdout, stderr io.Writer) (*pipeline.Config, *cli, string, error) {
	cfg := pipeline.DefaultConfig()
	app, cl := newApp(&cfg, stdout, stderr)
	cmd, err := app.Parse(args)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%w (see --help)", err)
	}
	if cl.configFile != "" {
		cfg = pipeline.DefaultConfig()
		if err := pipeline.LoadConfigFile(cl.configFile, &cfg); err != nil {
			return nil, nil, "", err
		}
		app, cl = newApp(&cfg, stdout, stderr)
		if cmd, err = app.Parse(args); err != nil {
			return nil, nil, "", fmt.Errorf("%w (see --help)", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, "", fmt.Errorf("invalid configuration: %w", err)
	}
	return &cfg, cl, cmd, nil
}

func dispatch(ctx context.Context, cmd string, cfg *pipeline.Config, cl *cli, stdout io.Writer) error {
	logger := promslog.New(&cl.log)
	// The signal log runs until the command returns, and the command waits for it: the
	// shutdown line must be written before main exits.
	logCtx, stopLog := context.WithCancel(ctx)
	logged := make(chan struct{})
	go func() { logSignals(logCtx, logger); close(logged) }()
	defer func() { stopLog(); <-logged }()
	switch cmd {
	case cmdVersion:
		fmt.Fprintln(stdout, version.Print("cupti-exporter"))
		return nil
	case cmdReplay:
		return pipeline.Replay(ctx, logger, cfg, cl.replay)
	case cmdRecord:
		return pipeline.Record(ctx, logger, cfg, cl.record)
	case cmdList, cmdDescribe, cmdPlan:
		return runMetrics(cmd, logger, cfg, cl, stdout)
	case cmdChips:
		return runChips(logger, cfg, cl, stdout)
	case cmdWebhook:
		return runWebhook(ctx, logger, cfg, &cl.webhook)
	}
	if cl.demo {
		return pipeline.Demo(ctx, logger, cfg)
	}
	return pipeline.Serve(ctx, logger, cfg)
}
