package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/receiver"
	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/idle"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/profilers"
)

// otlpTurnedOnBy says what turned the push on: the configuration or a variable.
func otlpTurnedOnBy(endpoint, envVar string) string {
	if endpoint != "" {
		return "configuration"
	}
	return envVar
}

// Serve samples this host's GPUs. Without CUPTI (or with PM sampling disabled) it still
// serves activity and self metrics, and /readyz and the logs say why PM sampling is off.
func Serve(ctx context.Context, logger *slog.Logger, cfg *Config) error {
	m, err := newMapper(cfg)
	if err != nil {
		return err
	}
	pm := pmSetup{mapper: m, live: true}
	switch {
	case !cfg.PMSample.Enabled:
		pm.off, pm.offCode = "PM sampling disabled by configuration (pmsample.enabled=false)", exporter.ReasonDisabled
	case cfg.gpmOnly():
		pm.off, pm.offCode = "PM sampling off: gpm.mode=only serves the curated metrics from NVML GPM", exporter.ReasonDisabled
	default:
		lib, err := cupti.Open(cupti.Options{LibraryPath: cfg.CUPTI.Library})
		if err != nil {
			pm.off, pm.offCode = fmt.Sprintf("PM sampling is off: %v", err), exporter.ReasonNoCUPTI
			break
		}
		defer lib.Close()
		pm.profilers = profilersSetup(logger, cfg) // nil when off; looks at the processes before New
		opts := append(samplerOptions(cfg), pmsample.WithCountersInUse(pm.profilers != nil && pm.profilers.Found()))
		s, err := pmsample.New(lib, m, logger, opts...)
		if err != nil {
			return fmt.Errorf("setting up PM sampling: %w", err)
		}
		defer s.Close()
		if pm.profilers != nil {
			pm.profilers.Drive(s) // before Run: a profiler already running keeps its GPUs
			pm.giveWays = pmsample.NewGiveWayProducer(s)
		}
		pm.src, pm.pause = s, s.Handler()
		pm.status = func() []exporter.Status { return samplerStatus(s.Status()) }
		pm.aggOpts = []aggregate.Option{aggregate.WithStatus(s.Status)}
		pm.idle, pm.idleMetrics = idleSetup(logger, cfg, s) // nil when off (idle.go)
	}
	if pm.off != "" && !cfg.gpmOnly() {
		logger.Warn(pm.off)
	}
	kube, err := startPodInformer(ctx, logger, cfg)
	if err != nil {
		return err
	}
	budget := activity.NewBudget(int64(cfg.Activity.MemoryBudget))
	// The host's GPUs for the activity socket: the PM source's, else NVML's (PM sampling
	// off), so that made-up device UUIDs do not fill the device table.
	pm.nvml = &nvmlGPUs{}
	hostGPUs := func() []pmdata.Device {
		if ds := pm.devices(); len(ds) > 0 {
			return ds
		}
		return pm.nvml.devices()
	}
	actOpts := append(liveActivityOptions(hostGPUs, budget), activity.WithTrustHelloPods(cfg.Activity.TrustHelloPods))
	actOpts = append(actOpts, budgetActivityOptions(cfg)...)
	if cfg.Activity.Enabled {
		if actOpts, err = pm.attribute(cfg, logger, budget, actOpts); err != nil {
			return err
		}
	}
	var extra []namedProducer
	if kube != nil {
		actOpts = append(actOpts, activity.WithPodResolver(podResolver(kube)))
		pm.pidPod = pidPodResolver(kube, "/proc")
		extra = append(extra, namedProducer{name: "kubepods", p: kube})
	}
	if pm.idle != nil { // kernel records wake an idle-released GPU
		actOpts = append(actOpts, activity.WithListener(pm.idle))
	}
	act := pm.newActivity(actOpts)
	if !cfg.Activity.Enabled {
		return serveSources(ctx, logger, cfg, pm, act, extra...)
	}
	srv, err := receiver.NewServer(cfg.Activity.Socket, act, logger, receiverOptions(cfg, budget)...)
	if err != nil {
		return fmt.Errorf("%w (set --activity.socket, or --no-activity.enabled)", err)
	}
	defer srv.Close()
	extra = append(extra, namedProducer{status: socketStatus(srv)})
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx) }()
	logger.Info("receiving activity records", "socket", srv.Path())
	err = serveSources(ctx, logger, cfg, pm, act, extra...)
	srv.Close()
	return errors.Join(err, <-errc)
}

// pmSetup is the PM sample side of serving: a source (the CUPTI sampler or a recording), or
// nil with off saying why there is none.
type pmSetup struct {
	mapper  *mapping.Mapper
	src     pmdata.Source
	pause   http.Handler             // the pause/resume API of a live sampler
	status  func() []exporter.Status // readiness of a live sampler; nil: ready after the first batch
	aggOpts []aggregate.Option
	off     string                  // why there is no source, in full
	offCode string                  // the same as a reason code of cupti_exporter_source_up
	live    bool                    // this host's GPUs, not a recording: read their health from NVML too
	health  *replayHealth           // a recording's health frames, served as source "health"; nil: none
	attr    *attribution.Attributor // the attribution join; nil when off
	feed    joinFeed                // what feeds the join (jointap.go); set with attr
	// pidPod resolves a PID NVML lists to its pod (cgroup and pod informer); nil: no informer
	pidPod func(pid uint32) (pod, namespace, container string, ok bool)
	nvml   *nvmlGPUs // the GPUs NVML found, once the health source runs; nil: not serving
	// idle releases the session of idle GPUs (nil: off); idleMetrics are its counters.
	idle        *idle.Controller
	idleMetrics exporter.Producer
	// profilers gives the counters to profilers on the host (nil: off); giveWays counts it.
	profilers *profilers.Watcher
	giveWays  exporter.Producer
}

// attribute sets up the attribution join when it is enabled and PM samples flow: it
// returns the activity options plus the join as a listener. What clients make the join hold
// is charged to budget, the activity receiver's.
func (pm *pmSetup) attribute(cfg *Config, logger *slog.Logger, budget *activity.Budget, opts []activity.Option) ([]activity.Option, error) {
	if !cfg.Attribution.Enabled || pm.src == nil {
		return opts, nil
	}
	a, err := attribution.New(pm.src.Devices(), pm.src.Catalog(), pm.mapper, logger,
		append(budgetAttributionOptions(cfg),
			attribution.WithWatermark(time.Duration(cfg.Attribution.Watermark)),
			attribution.WithEstimator(cfg.Attribution.Estimator),
			attribution.WithMaxPendingRecords(cfg.Attribution.MaxPendingRecords),
			attribution.WithBudget(budget))...)
	if err != nil {
		return nil, fmt.Errorf("setting up attribution: %w", err)
	}
	pm.attr = a
	pm.feed = tapJoin(a, pm.src.Devices(), pm.src.Catalog(), logger)
	logger.Info("attributing PM samples to kernels and pods", "watermark", cfg.Attribution.Watermark, "estimator", cfg.Attribution.Estimator)
	return append(opts, activity.WithListener(pm.feed.activity)), nil
}

// joinFeed is what feeds the attribution join: the activity aggregator's events, the PM
// batches and NVML's processes. It is the join itself, but in a diagnostic build (-tags
// jointap) that records them.
type joinFeed struct {
	activity  activity.Listener
	batches   pmdata.Consumer
	processes health.ProcessListener
}

// feedOf is the join fed directly: what a release build uses, and a jointap build without
// CUPTI_EXPORTER_JOINTAP.
func feedOf(a *attribution.Attributor) joinFeed {
	return joinFeed{activity: a, batches: a, processes: a}
}

// newActivity makes the activity aggregator with opts; the attribution join, one of its
// listeners, labels kernels with the aggregator's bounded kernel labels.
func (pm *pmSetup) newActivity(opts []activity.Option) *activity.Aggregator {
	act := activity.NewAggregator(opts...)
	if pm.attr != nil {
		pm.attr.LabelKernelsWith(act)
	}
	return act
}

// namedProducer is one more source of self-metrics to register (the pod informer), or of
// readiness (the activity socket).
type namedProducer struct {
	name   string
	p      exporter.Producer
	status exporter.StatusReporter
}

// socketStatus is the readiness of the activity socket: required, so that /readyz says 503
// while a removed or replaced socket file is not re-created.
func socketStatus(srv *receiver.Server) exporter.StatusReporter {
	return statusFunc(func() []exporter.Status {
		if p := srv.SocketProblem(); p != "" {
			return []exporter.Status{{Source: "activity", Reason: p, Code: exporter.ReasonNoSocket, Required: true}}
		}
		return []exporter.Status{{Source: "activity", Ready: true, Required: true}}
	})
}

// devices lists the source's devices (none when PM sampling is off).
func (pm *pmSetup) devices() []pmdata.Device {
	if pm.src == nil {
		return nil
	}
	return pm.src.Devices()
}

// serveSources runs the PM source into its aggregator, registers both aggregators with the
// exporter (with the extra producers), serves HTTP and pushes OTLP until ctx ends.
func serveSources(ctx context.Context, logger *slog.Logger, cfg *Config, pm pmSetup, act *activity.Aggregator, extra ...namedProducer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var expOpts []exporter.Option
	pods, resSlices, err := newPodResources(ctx, logger, cfg, pm) // resourceslices.go
	if err != nil {
		return err
	}
	if pods != nil {
		defer pods.Close()
		expOpts = append(expOpts, exporter.WithDeviceLabeler(pods))
		logger.Info("attributing GPUs to pods", "socket", cfg.Kubelet.PodResourcesSocket)
	}
	exp := exporter.New(logger, expOpts...)
	exp.Register("activity", act)
	if pm.live && cfg.Health.Enabled {
		var opts []health.Option
		if pm.pidPod != nil {
			opts = append(opts, health.WithPodResolver(pm.pidPod))
		}
		if pm.attr != nil { // who else is on the GPU: NVML's processes into the join
			opts = append(opts, health.WithProcessListener(pm.feed.processes))
		}
		src := startHealth(ctx, logger, cfg, exp, pm.devices, opts...)
		if pm.nvml != nil {
			pm.nvml.src.Store(src)
		}
	} else if pm.attr != nil && pm.live {
		logger.Warn("NVML health is off: attribution cannot see processes that load no injection library; their work lands on the traced kernels they overlap (docs/attribution.md)")
	}
	if pm.health != nil && cfg.Health.Enabled {
		pm.health.view = healthView(cfg, pm.health) // before the replay runs: it tells the view every frame
		exp.Register("health", pm.health.view)
		exp.RegisterStatus("health", statusFunc(pm.health.status))
	}
	if pm.attr != nil {
		exp.Register("attribution", pm.attr)
	}
	if pods != nil {
		exp.Register("podresources", pods)
	}
	if resSlices != nil {
		exp.Register("resourceslices", resSlices)
	}
	for _, x := range extra {
		if x.p != nil {
			exp.Register(x.name, x.p)
		}
		if x.status != nil {
			exp.RegisterStatus("activity_socket", x.status)
		}
	}
	srcErr := make(chan error, 1)
	switch src := pm.src; {
	case src == nil:
		// Without PM sampling GPM serves the curated metrics of every GPU it reads (gpmsource).
		if gpm, _ := startGPM(ctx, logger, cfg, exp, &pm, nil); gpm != nil {
			exp.Register("gpm", gpm)
		}
		if !cfg.gpmOnly() { // with gpm.mode=only PM sampling is meant to be off
			exp.RegisterStatus("pmsample", statusFunc(func() []exporter.Status {
				return []exporter.Status{{Source: "pmsample", Ready: false, Reason: pm.off, Code: pm.offCode}}
			}))
		}
	default:
		opts := append(append([]aggregate.Option{aggregate.WithWindow(time.Duration(cfg.PMSample.Window))}, budgetAggregatorOptions(cfg)...), pm.aggOpts...)
		agg := aggregate.New(pm.mapper, src.Devices(), src.Catalog(), logger, opts...)
		// GPM fills in the curated metrics of the GPUs PM sampling cannot read (gpmsource).
		served, gpm := startGPM(ctx, logger, cfg, exp, &pm, agg)
		exp.Register("pmsample", served)
		var fed atomic.Bool
		status := pm.status
		if s, ok := src.(*pmsample.Sampler); ok && gpm != nil { // /readyz names who holds busy counters
			status = func() []exporter.Status { ds := s.Status(); return withHolders(samplerStatus(ds), ds, gpm) }
		}
		if status == nil { // a recording: ready once its first batch is in
			status = func() []exporter.Status {
				if !fed.Load() {
					return []exporter.Status{{Source: "pmsample", Reason: "waiting for the first batch", Code: exporter.ReasonStarting}}
				}
				return []exporter.Status{{Source: "pmsample", Ready: true}}
			}
		}
		exp.RegisterStatus("pmsample", statusFunc(status))
		if pm.idle != nil {
			exp.Register("pmsample_idle", pm.idleMetrics)
			go pm.idle.Run(ctx)
		}
		if pm.profilers != nil {
			exp.Register("pmsample_give_way", pm.giveWays)
			exp.Register("pmsample_give_way_watch", pm.profilers)
			go pm.profilers.Run(ctx)
		}
		consumers := fanOut{agg}
		if pm.attr != nil {
			consumers = append(consumers, pm.feed.batches)
		}
		if pm.idle != nil {
			consumers = append(consumers, pm.idle)
		}
		consumers = append(consumers, (*fedFlag)(&fed))
		go func() { srcErr <- src.Run(ctx, consumers.Add) }()
	}

	maxConns, err := httpServerLimits(logger, cfg, pm.live && cfg.Activity.Enabled)
	if err != nil {
		return err
	}
	srv := exporter.NewServer(logger, exporter.ServerConfig{
		ListenAddresses:     []string{cfg.Web.ListenAddress},
		HealthListenAddress: cfg.Web.HealthAddress(),
		WebConfigFile:       cfg.Web.ConfigFile,
		TelemetryPath:       cfg.Web.TelemetryPath,
		MaxRequests:         cfg.Web.MaxRequests,
		MaxConnections:      maxConns,
		IdleTimeout:         time.Duration(cfg.Web.IdleTimeout),
		WriteTimeout:        time.Duration(cfg.Web.WriteTimeout),
		Registry:            exp.Registry(),
		Status:              exp,
	})
	srv.Handle(exporter.PauseAPIPath+"/", pmSamplingAPI(cfg, pm))
	otlpFromEnv, otlpEnvVar := exporter.OTLPFromEnv()
	if cfg.OTLP.Endpoint != "" || otlpFromEnv {
		naming, _ := exporter.ParseNaming(cfg.OTLP.Naming) // validated with the configuration
		o, err := exporter.NewOTLP(ctx, exporter.OTLPConfig{
			Naming:   naming,
			Protocol: cfg.OTLP.Protocol, Endpoint: cfg.OTLP.Endpoint, Insecure: cfg.OTLP.Insecure,
			Headers: cfg.OTLP.Header, Interval: time.Duration(cfg.OTLP.Interval), Timeout: time.Duration(cfg.OTLP.Timeout),
			ResourceAttributes: cfg.OTLP.Resource, SelfMetrics: prometheus.Gatherers{exp.SelfMetrics(), srv.SelfMetrics()},
			Registerer: exp.Registry(), Logger: logger,
		}, exp.Producers()...)
		if err != nil {
			return fmt.Errorf("setting up OTLP push: %w", err)
		}
		defer func() {
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			if err := o.Shutdown(sctx); err != nil {
				logger.Warn("final OTLP push failed", "err", err)
			}
		}()
		interval := exporter.DefaultOTLPInterval.String()
		switch env := os.Getenv("OTEL_METRIC_EXPORT_INTERVAL"); {
		case cfg.OTLP.Interval > 0:
			interval = cfg.OTLP.Interval.String()
		case env != "":
			interval = env + "ms (OTEL_METRIC_EXPORT_INTERVAL)"
		}
		t := o.Target() // what the exporter dials, not what it was given
		logger.Info("pushing OTLP", "endpoint", t.Endpoint, "endpoint_from", t.From, "protocol", t.Protocol, "tls", t.TLS,
			"interval", interval, "naming", naming.String(), "turned_on_by", otlpTurnedOnBy(cfg.OTLP.Endpoint, otlpEnvVar))
	}

	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Run(ctx) }()
	select {
	case err := <-srvErr:
		cancel()
		return err
	case err := <-srcErr:
		if ctx.Err() != nil { // shutting down
			return <-srvErr
		}
		if err != nil {
			cancel()
			<-srvErr
			return fmt.Errorf("PM sample source: %w", err)
		}
		if pm.attr != nil {
			// No sample comes after the last: attribute what waits for the watermark now, so
			// the first scrape after this line serves the whole source joined (a replay's end).
			pm.attr.Flush()
		}
		logger.Info("PM sample source finished; still serving its last values")
		return <-srvErr
	}
}

// pmSamplingAPI is the handler of /api/v1/pm-sampling/: the sampler's pause/resume API when
// --web.enable-pm-sampling-api is given and a live sampler runs, otherwise a 404 that says why
// (anything that reaches the port could otherwise stop GPU monitoring). A recording has
// nothing to pause, flag or not, and says only that.
func pmSamplingAPI(cfg *Config, pm pmSetup) http.Handler {
	var why string
	switch {
	case !pm.live:
		why = noSessionInRecording
	case !cfg.Web.EnablePMSamplingAPI:
		why = "the PM sampling API (pause/resume) is off: start the exporter with --web.enable-pm-sampling-api " +
			"(YAML web.enable_pm_sampling_api: true) to serve it, and protect the port with --web.config.file"
	case pm.pause != nil:
		return pm.pause
	default:
		why = "no PM sampling session to pause: " + pm.off
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{why})
	})
}

// noSessionInRecording is why a recording has no pause/resume API.
const noSessionInRecording = "no PM sampling session to pause: this exporter serves a recording (replay or --demo), not the GPUs; " +
	"the pause/resume API (--web.enable-pm-sampling-api) is for `serve` on a GPU host"

// fanOut hands every batch of the PM source to each of its consumers in turn.
type fanOut []pmdata.Consumer

func (f fanOut) Add(b pmdata.Batch) {
	for _, c := range f {
		c.Add(b)
	}
}

// fedFlag is set once the PM source has delivered a batch (a recording's readiness).
type fedFlag atomic.Bool

func (f *fedFlag) Add(pmdata.Batch) { (*atomic.Bool)(f).Store(true) }

type statusFunc func() []exporter.Status

func (f statusFunc) Status() []exporter.Status { return f() }

// samplerStatus turns the sampler's device states into exporter readiness.
func samplerStatus(ds []pmdata.DeviceStatus) []exporter.Status {
	out := make([]exporter.Status, 0, len(ds))
	for _, d := range ds {
		out = append(out, exporter.Status{Source: "pmsample", Device: strconv.Itoa(d.Device), Ready: d.Ready, Reason: d.Reason, Code: string(d.State)})
	}
	return out
}

// newMapper builds the metric mapper with the rules file's rules, if any.
func newMapper(cfg *Config) (*mapping.Mapper, error) {
	var rules []mapping.Rule
	if cfg.Mapping.RulesFile != "" {
		r, err := mapping.LoadRulesFile(cfg.Mapping.RulesFile)
		if err != nil {
			return nil, err
		}
		rules = r
	}
	return mapping.New(rules...)
}

func samplerOptions(cfg *Config) []pmsample.Option {
	return append(cfg.PMSample.Config.Options(), cfg.PMSample.LoopConfig.Options()...)
}

// activityOptions labels activity series with the host's GPU index of the UUID a process
// reports (its own CUDA ordinals are remapped by CUDA_VISIBLE_DEVICES), as PM series do.
func activityOptions(devices func() []pmdata.Device) []activity.Option {
	return []activity.Option{activity.WithGPUResolver(gpuLabelOf(devices))}
}

// gpuLabelOf maps a device UUID (as a process or NVML reports it) to the gpu label of the PM
// series: the index of the source's device with that UUID.
func gpuLabelOf(devices func() []pmdata.Device) func(uuid string) (string, bool) {
	return func(uuid string) (string, bool) {
		if d, ok := deviceByUUID(devices(), uuid); ok {
			return strconv.Itoa(d.Index), true
		}
		return "", false
	}
}

func deviceByUUID(ds []pmdata.Device, uuid string) (pmdata.Device, bool) {
	for _, d := range ds {
		if strings.EqualFold(d.UUID, uuid) {
			return d, true
		}
	}
	return pmdata.Device{}, false
}

// liveActivityOptions are activityOptions for records from the socket: devices a process
// declares must exist on this host (when the PM source knows the host's GPUs), and the
// per-device state is charged to the receiver's budget.
func liveActivityOptions(devices func() []pmdata.Device, budget *activity.Budget) []activity.Option {
	return append(activityOptions(devices),
		activity.WithBudget(budget),
		activity.WithDeviceFilter(func(uuid string) (exists, known bool) {
			ds := devices()
			_, exists = deviceByUUID(ds, uuid)
			return exists, exists || len(ds) > 0
		}))
}

// receiverOptions are the activity socket server's options from the configuration.
func receiverOptions(cfg *Config, budget *activity.Budget) []receiver.Option {
	return []receiver.Option{
		receiver.WithSocketMode(cfg.Activity.SocketFileMode()),
		receiver.WithMaxConnections(cfg.Activity.MaxConnections),
		receiver.WithHelloTimeout(time.Duration(cfg.Activity.HelloTimeout)),
		receiver.WithIdleTimeout(time.Duration(cfg.Activity.IdleTimeout)),
		receiver.WithBudget(budget),
		receiver.WithProcRoot(cfg.Activity.ProcRoot),
		receiver.WithMaxConnectionsPerIdentity(cfg.Activity.MaxConnectionsPerIdentity),
	}
}
