package pmsample

import (
	"runtime"
	"sync"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// Pipeline modes (WithPipeline).
const (
	// PipelineSerial decodes, evaluates and resets on the device's one thread (the default).
	PipelineSerial = "serial"
	// PipelineDouble decodes into one of two counter data images per group on the device
	// thread while a second thread evaluates and resets the other: the decode thread's cost
	// per sample drops to the decode alone, and the two overlap. Whether CUPTI allows a decode
	// and an image reset of one session at once is what the pmthroughput GPU stage checks;
	// until it has, serial stays the default.
	PipelineDouble = "double"
)

// splitDecoder is a device whose decode and evaluation can run on two threads, with two
// counter data images (slots 0 and 1) per group. DecodeInto runs on the device thread,
// Evaluate on the evaluator thread, never on the same slot at once.
type splitDecoder interface {
	// DecodeInto decodes the hardware buffer into slot of group g.
	DecodeInto(g, slot int) (cupti.DecodeResult, error)
	// Evaluate calls fn for every completed sample of slot (values nil when evaluation
	// failed) and then re-initialises the slot unless the decode stopped full.
	Evaluate(g, slot int, full bool, fn func(start, end uint64, values []float64)) error
}

// pipeline is the evaluator thread of one device and the two image slots it shares with
// the device thread. Everything the evaluator touches of the runner (loss account,
// admission, logs) the device thread touches only after wait.
type pipeline struct {
	sd    splitDecoder
	jobs  chan pipeJob
	free  chan int // slots the device thread may decode into
	busy  sync.WaitGroup
	done  chan struct{}
	reset chan struct{} // an evaluator reset failed: the session must be recreated
}

type pipeJob struct {
	group, slot int
	startNS     uint64
	res         cupti.DecodeResult
	err         error
	decode      time.Duration // wall time of the decode call
	gap         time.Duration // since the session's previous decode (Batch.DecodeGap)
	cpu         time.Duration // device thread CPU since its previous job
	sink        func(pmdata.Batch)
}

func newPipeline(sd splitDecoder) *pipeline {
	p := &pipeline{sd: sd, jobs: make(chan pipeJob, 1), free: make(chan int, 2), done: make(chan struct{}),
		reset: make(chan struct{}, 1)}
	p.free <- 0
	p.free <- 1
	return p
}

// run is the evaluator thread; it ends when the jobs channel closes.
func (p *pipeline) run(r *runner) {
	runtime.LockOSThread()
	if raisePriority() != nil { // as the runner's thread (runner.run): a raised thread ends with us
		defer runtime.UnlockOSThread()
	}
	defer close(p.done)
	var mark time.Duration
	for j := range p.jobs {
		p.finish(r, j, &mark)
		p.busy.Done()
	}
}

// finish evaluates and resets one decoded image and delivers its batch, on the evaluator thread.
func (p *pipeline) finish(r *runner, j pipeJob, mark *time.Duration) {
	t0 := time.Now()
	b, fn := r.newBatch(j.group, j.startNS)
	b.DecodeGap = j.gap
	full := j.res.StopReason == cupti.StopCounterDataFull
	if j.err == nil && !j.res.Overflow {
		if err := p.sd.Evaluate(j.group, j.slot, full, fn); err != nil {
			b.DecodeErrors++
			r.loss.open("decode_error", r.now())
			r.log.Warn("evaluating pm samples", "err", err)
			select {
			case p.reset <- struct{}{}:
			default:
			}
		}
	}
	r.outcome(b, j.res, j.err) // after the samples: the causes it opens follow them
	eval := time.Since(t0)
	b.DecodeDuration = j.decode + eval
	b.ThreadCPU = j.cpu
	// The two threads overlap: what the pipeline sustains is set by the slower of them.
	r.deliver(b, j.sink, mark, max(j.decode, eval))
	p.free <- j.slot
}

// collect decodes into a free slot on the device thread (waiting while the evaluator holds
// both) and hands it over. It reports whether the session is dead: an overflow, a full
// image, or a reset that failed on the evaluator; then it waits for the evaluator first.
func (p *pipeline) collect(r *runner, sink func(pmdata.Batch)) (dead bool) {
	slot := <-p.free
	gap := r.decodeGap()
	t0 := time.Now()
	res, err := p.sd.DecodeInto(r.group, slot)
	j := pipeJob{group: r.group, slot: slot, startNS: r.startNS, res: res, err: err, decode: time.Since(t0), gap: gap, sink: sink}
	if cpu := threadCPU(); cpu > 0 {
		if r.cpuMark > 0 {
			j.cpu = cpu - r.cpuMark
		}
		r.cpuMark = cpu
	}
	overflow, full := decodeOutcome(res, err)
	r.countDecodeError(overflow, full, err)
	p.busy.Add(1)
	p.jobs <- j
	select {
	case <-p.reset:
		p.wait()
		return true
	default:
	}
	if overflow || (full && !r.replacesImages()) {
		p.wait()
		return true
	}
	return false
}

// wait blocks until the evaluator has finished every image handed to it. Safe on nil.
func (p *pipeline) wait() {
	if p != nil {
		p.busy.Wait()
	}
}

// stop ends the evaluator thread. Safe on nil.
func (p *pipeline) stop() {
	if p != nil {
		p.wait()
		close(p.jobs)
		<-p.done
	}
}
