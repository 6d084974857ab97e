package activity

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Aggregator turns activity records into Prometheus-style families: histograms of kernel,
// memcpy and memset durations, GPU time per pod, byte counters and its own accounting
// (records, drops, processes, connections). Add, Connect, Disconnect and the accounting
// methods are safe for concurrent use; Snapshot may be called at any time.
type Aggregator struct {
	cfg   config
	gen   atomic.Uint64 // bumped on every change; Snapshot rebuilds when it moved
	names *nameCache    // short kernel names, computed outside mu (names.go)
	// namesFull mirrors "the kernel table remembers maxTrackedNames names": new names are
	// then not shortened at all (their records go to kernel="other").
	namesFull atomic.Bool

	mu        sync.Mutex
	start     time.Time
	procs     map[*record.Process]*procState
	senders   map[senderID]*senderState
	devices   map[deviceKey]*device
	kernels   kernelTable
	podSeries map[podKey]*podSeries
	memcpy    map[memcpyKey]*memSeries
	memset    map[memsetKey]*memSeries
	// Histograms of copies and fills, by the keys of copySplit (memcpy and memset hold the
	// byte counters, always per GPU and pod).
	memcpyHist map[memcpyKey]*kernelSeries
	memsetHist map[memsetKey]*kernelSeries
	// nodeDevice and nodePod stand for every GPU and every pod in the keys of histograms
	// not split by them (empty labels): such a series expires after the TTL without records.
	nodeDevice *device
	nodePod    *podRef
	pods       map[podID]*podRef             // interned pod labels
	records    [record.KindMemset + 1]uint64 // by Kind
	dropped    map[string]uint64
	connDrops  map[string]uint64
	recreated  [2]uint64 // socket file re-created: removed, replaced
	conns      uint64
	// idDevices counts, by identity (deviceOwner), the devices of the table its connected
	// processes use; devEvictions the devices taken out of the table, by reason (devices.go).
	idDevices    map[string]int
	devEvictions [len(deviceEvictionReasons)]uint64
	invalid      map[string]uint64 // sender reports refused, by reason (senderdrops.go)

	podResolutions map[string]uint64 // connections by how their pod labels were decided
	identities     map[string]uint64 // connections by identity (identity.go)
	refusedClaims  map[[2]string]uint64

	tracedSeconds, lossySeconds float64 // coverage reported by processes

	split splitState // the per-pod time split (timesplit.go)

	snapMu  sync.Mutex // serialises rebuilds
	snap    atomic.Pointer[snapshot.Snapshot]
	snapGen atomic.Uint64
}

// device is one gpu/uuid label pair; Aggregator.devices interns them so that series keys
// hash a pointer rather than strings. A device the Aggregator refused (one the host does not
// have, or past the device limit or the memory budget) is not interned and has unknown set:
// its records are dropped (reason unknown_device) and create no series.
type device struct {
	gpu, uuid string
	unknown   bool
	owners    map[string]int // identities (deviceOwner) of the connected processes using it, with how many each
	last      time.Time      // when the last of them left
	used      time.Time      // when a record was last counted on it
}

// deviceKey is what interns a device.
type deviceKey struct{ gpu, uuid string }

// maxDevices bounds the devices the Aggregator keeps series for (a host has a few GPUs; every
// process's CUDA ordinals map onto them).
const maxDevices = 256

// deviceStateBytes estimates the memory of one device's series (kernel histograms of the top
// kernels and "other", memcpy and memset series), charged to the budget.
func (a *Aggregator) deviceStateBytes() int64 {
	return int64(a.cfg.topKernels+1+16) * int64(a.cfg.maxBuckets*16+256)
}

// procState is what the Aggregator knows of one connected process.
type procState struct {
	devs   []*device    // by CUDA ordinal
	pods   []*podSeries // by CUDA ordinal, filled lazily
	sender *senderState // its process's, across reconnects

	pod         *podRef   // interned labels, set when connected
	podAnswer   podAnswer // taken before connecting, without the lock
	podPending  bool      // the resolver answered PodPending: ask again at podRetry
	podRetry    time.Time
	podDeadline time.Time // give up then (counted as timed_out)
	tl          *timeline // the time split's records and spans (timesplit.go)
}

// senderID names a process across reconnects: its sender-side drop counters are
// cumulative over its lifetime. A claimed process (identity.go) never shares the state of
// a verified one, so that no hello can report drops for another process.
type senderID struct {
	pid     uint32
	start   uint64
	claimed bool
}

func senderOf(p *record.Process) senderID {
	return senderID{p.PID, p.StartTime, p.Identity == record.IdentityClaimed}
}

type senderState struct {
	last  map[string]uint64
	conns int
	first time.Time // when the exporter first heard of the process (plausible.go)
	seen  time.Time
	conn  *record.Process // the connection whose drop report was taken last (senderdrops.go)
}

// senderLocked returns the state of p's process, made on first use; a.mu is held.
func (a *Aggregator) senderLocked(p *record.Process) *senderState {
	id := senderOf(p)
	s := a.senders[id]
	if s == nil {
		s = &senderState{last: make(map[string]uint64), first: a.cfg.now()}
		a.senders[id] = s
	}
	return s
}

// histSeriesOf is the device and pod of a histogram's key under split s: dev and pod
// themselves where split by them, else the node-wide placeholders.
func (a *Aggregator) histSeriesOf(s Split, dev *device, pod *podRef) (*device, *podRef) {
	if s&SplitGPU == 0 {
		dev = a.nodeDevice
	}
	if s&SplitPod == 0 {
		pod = a.nodePod
	}
	return dev, pod
}

// NewAggregator returns an empty Aggregator.
func NewAggregator(opts ...Option) *Aggregator {
	a := &Aggregator{
		cfg:            newConfig(opts),
		names:          newNameCache(),
		procs:          make(map[*record.Process]*procState),
		senders:        make(map[senderID]*senderState),
		devices:        make(map[deviceKey]*device),
		podSeries:      make(map[podKey]*podSeries),
		memcpy:         make(map[memcpyKey]*memSeries),
		memset:         make(map[memsetKey]*memSeries),
		memcpyHist:     make(map[memcpyKey]*kernelSeries),
		memsetHist:     make(map[memsetKey]*kernelSeries),
		pods:           make(map[podID]*podRef),
		podResolutions: make(map[string]uint64),
		identities:     make(map[string]uint64),
		refusedClaims:  make(map[[2]string]uint64),
		dropped:        make(map[string]uint64),
		connDrops:      make(map[string]uint64),
		idDevices:      make(map[string]int),
	}
	a.nodeDevice, a.nodePod = &device{}, &podRef{}
	a.start = a.cfg.now()
	a.kernels.init(a.cfg.topKernels, a.start)
	a.gen.Add(1)
	return a
}

// Connect registers a process that said hello. It resolves the process's device labels
// and pod (calling the resolvers without holding the lock). Add connects a process it
// does not know, so calling Connect is optional but makes the process count as connected
// before its first records.
func (a *Aggregator) Connect(p *record.Process) {
	ps := a.newProcState(p)
	a.mu.Lock()
	ps = a.connectLocked(p, ps)
	info := ps.info(p)
	a.mu.Unlock()
	a.gen.Add(1)
	for _, l := range a.cfg.listeners {
		l.ProcessConnected(p, info)
	}
}

func (a *Aggregator) connectLocked(p *record.Process, ps *procState) *procState {
	if old, ok := a.procs[p]; ok {
		return old
	}
	owner := deviceOwner(p)
	for i, d := range ps.devs {
		ps.devs[i] = a.internLocked(d, owner)
	}
	a.procs[p] = ps
	a.startPodLocked(ps, ps.podAnswer, p.Identity, a.cfg.now())
	s := a.senderLocked(p)
	ps.sender = s
	s.conns++
	if p.Identity != record.IdentityUnchecked {
		a.identities[p.Identity.String()]++
	}
	s.seen = a.cfg.now()
	return ps
}

func (a *Aggregator) newProcState(p *record.Process) *procState {
	ps := &procState{podAnswer: a.askPod(p)}
	ps.devs = make([]*device, len(p.DeviceUUIDs))
	for i, uuid := range p.DeviceUUIDs {
		ps.devs[i] = &device{gpu: a.gpuLabel(uuid, i), uuid: uuid, unknown: !a.deviceExists(uuid, p.Identity)}
	}
	ps.pods = make([]*podSeries, len(ps.devs))
	return ps
}

// InvalidDeviceUUID stands, in a hello, for a device UUID the receiver refused as not UUID
// text: its records are dropped as unknown_device.
const InvalidDeviceUUID = "GPU-invalid"

// deviceExists asks the device filter whether the host has the GPU uuid; a GPU the filter
// cannot judge (no filter, the host's GPUs unknown, or no UUID in the hello) is taken from
// a verified (or recorded) process, not from a claimed one: made-up UUIDs in claimed hellos
// would fill the device table, and real records would then be dropped as unknown_device.
func (a *Aggregator) deviceExists(uuid string, id record.Identity) bool {
	if uuid == InvalidDeviceUUID {
		return false
	}
	if uuid == "" || a.cfg.deviceFilter == nil {
		return true
	}
	exists, known := a.cfg.deviceFilter(uuid)
	return exists || !known && id != record.IdentityClaimed
}

// internLocked returns the interned twin of d, interning d when new, or d marked unknown when
// the host does not have it or it passes the device limits (devices.go) or the memory budget.
// owner is the identity of the process that uses it (deviceOwner).
func (a *Aggregator) internLocked(d *device, owner string) *device {
	if d.unknown {
		return d
	}
	k := deviceKey{d.gpu, d.uuid}
	in := a.devices[k]
	if in == nil {
		if !a.roomForDeviceLocked(owner) || !a.cfg.budget.Reserve(a.deviceStateBytes()) {
			return &device{gpu: d.gpu, uuid: d.uuid, unknown: true}
		}
		in = d
		a.devices[k] = in
	}
	a.ownLocked(in, owner, 1)
	return in
}

func (a *Aggregator) gpuLabel(uuid string, ordinal int) string {
	if uuid != "" && a.cfg.gpuResolver != nil {
		if gpu, ok := a.cfg.gpuResolver(uuid); ok {
			return gpu
		}
	}
	return strconv.Itoa(ordinal)
}

// Disconnect marks a process gone (goodbye or end of its connection). Its per-pod series
// stay for the series TTL.
func (a *Aggregator) Disconnect(p *record.Process) {
	a.finishSplit(p)
	a.mu.Lock()
	known := a.disconnectLocked(p)
	a.mu.Unlock()
	if !known {
		return
	}
	a.gen.Add(1)
	for _, l := range a.cfg.listeners {
		l.ProcessDisconnected(p)
	}
}

func (a *Aggregator) disconnectLocked(p *record.Process) bool {
	ps, ok := a.procs[p]
	if !ok {
		return false
	}
	now := a.cfg.now()
	delete(a.procs, p)
	ps.pod.procs--
	owner := deviceOwner(p)
	for _, d := range ps.devs {
		if !d.unknown {
			d.last = now
			a.ownLocked(d, owner, -1)
		}
	}
	for _, s := range ps.pods {
		if s != nil {
			s.refs--
			s.last = now
		}
	}
	if s := a.senders[senderOf(p)]; s != nil {
		s.conns--
		s.seen = now
	}
	return true
}

// Add aggregates one batch of records of process p, calling the record tap first.
func (a *Aggregator) Add(p *record.Process, recs []record.Record) {
	if a.cfg.tap != nil {
		a.cfg.tap(p, recs)
	}
	if len(recs) == 0 {
		return
	}
	names := a.kernelNames(recs)
	defer namesPool.Put(names)
	a.mu.Lock()
	ps := a.procs[p]
	if ps == nil {
		a.mu.Unlock()
		fresh := a.newProcState(p) // resolvers run unlocked
		a.mu.Lock()
		ps = a.connectLocked(p, fresh)
		if len(a.cfg.listeners) > 0 {
			info := ps.info(p)
			a.mu.Unlock()
			for _, l := range a.cfg.listeners {
				l.ProcessConnected(p, info)
			}
			a.mu.Lock()
		}
	}
	now := a.cfg.now()
	a.retryPodLocked(p, ps, now)
	a.kernels.maybeRerank(now, a.cfg.rerankInterval)
	life := lifeLimit{start: lifeStart(p, ps.sender), now: uint64(now.UnixNano())}
	implausible := 0
	for i := range recs {
		r := &recs[i]
		var ns uint64
		if r.End > r.Start {
			ns = r.End - r.Start
		}
		dur := float64(ns) / 1e9 // division keeps 1000 ns == 1e-6 exactly
		dev := a.deviceOf(ps, r.Device)
		if dev == nil {
			a.dropped["unknown_device"]++
			continue
		}
		if !life.allows(r) {
			a.dropped[implausibleDuration]++
			implausible++
			continue
		}
		dev.used = now
		switch r.Kind {
		case record.KindKernel:
			hdev, hpod := a.histSeriesOf(a.cfg.kernelSplit, dev, ps.pod)
			a.kernels.observe(hdev, hpod, r.Name, (*names)[i].short, dur, a.cfg.buckets, a.cfg.maxBuckets, now)
			a.podSeriesOf(ps, r.Device, dev, now).observe(dur)
		case record.KindMemcpy:
			a.observeMemcpy(ps, dev, r, dur, now)
		case record.KindMemset:
			a.observeMemset(ps, dev, r, dur, now)
		default:
			a.dropped["unknown_kind"]++
			continue
		}
		a.observeSplitLocked(ps, r, (*names)[i].class)
		a.records[r.Kind]++
	}
	a.namesFull.Store(len(a.kernels.byMangled) >= maxTrackedNames)
	a.mu.Unlock()
	a.gen.Add(1)
	if implausible > 0 && len(a.cfg.listeners) > 0 {
		recs = plausibleOnly(recs, life, implausible) // the join and the idle controller never see them
	}
	for _, l := range a.cfg.listeners {
		l.Records(p, recs)
	}
}

var namesPool = sync.Pool{New: func() any { return new([]kernelName) }}

// kernelNames shortens (and classes) the kernel names of recs before Add takes the lock, so
// that no connection holds it while a name is shortened: the result holds, by index, the
// short name and class of each kernel record (consecutive records repeat names, and the cache
// keeps them across batches). While the kernel table is full, names it does not know are not
// shortened.
func (a *Aggregator) kernelNames(recs []record.Record) *[]kernelName {
	names := namesPool.Get().(*[]kernelName)
	*names = slices.Grow((*names)[:0], len(recs))[:len(recs)]
	full := a.namesFull.Load()
	var last string
	var lastName kernelName
	haveLast := false
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Kind != record.KindKernel || full:
			(*names)[i] = kernelName{}
		case haveLast && r.Name == last:
			(*names)[i] = lastName
		default:
			last, lastName, haveLast = r.Name, a.names.name(r.Name), true
			(*names)[i] = lastName
		}
	}
	return names
}

// deviceOf returns the interned labels of a CUDA ordinal of process ps, or nil when the
// ordinal is not one the process declared in its hello or the device is unknown (not on
// this host, or refused): such records must create no per-GPU state.
func (a *Aggregator) deviceOf(ps *procState, ordinal uint32) *device {
	if int64(ordinal) >= int64(len(ps.devs)) || ps.devs[ordinal].unknown {
		return nil
	}
	return ps.devs[ordinal]
}

// SenderDrops takes the cumulative drop counters a process reported (by reason) and
// adds their increase since its previous report to cupti_activity_dropped_records_total.
// Counters are per process lifetime, so the difference spans reconnects. Reports are
// validated (senderdrops.go): a counter that goes backwards or jumps implausibly is
// refused, counted in cupti_activity_invalid_reports_total and returned as an error for
// the caller to log; the totals never go down.
func (a *Aggregator) SenderDrops(p *record.Process, cumulative map[string]uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.senderLocked(p)
	s.seen = a.cfg.now()
	err := a.takeSenderDropsLocked(p, s, cumulative)
	a.gen.Add(1)
	return err
}

// DroppedRecords counts n records lost on the receiving side, by reason.
func (a *Aggregator) DroppedRecords(reason string, n uint64) {
	a.mu.Lock()
	a.dropped[reason] += n
	a.mu.Unlock()
	a.gen.Add(1)
}

// ConnectionAccepted counts an accepted connection.
func (a *Aggregator) ConnectionAccepted() {
	a.mu.Lock()
	a.conns++
	a.mu.Unlock()
	a.gen.Add(1)
}

// ConnectionDropped counts a connection the receiver refused or closed early, by reason
// (malformed, limit, read_error, hello_timeout, evicted_no_hello, evicted_idle, memory_budget,
// identity_refused).
func (a *Aggregator) ConnectionDropped(reason string) {
	a.mu.Lock()
	a.connDrops[reason]++
	a.mu.Unlock()
	a.gen.Add(1)
}

// SocketRecreated counts a re-creation of the activity socket file, by what happened to it
// (removed, replaced).
func (a *Aggregator) SocketRecreated(what string) {
	a.mu.Lock()
	if i := slices.Index(socketRecreateReasons, what); i >= 0 {
		a.recreated[i]++
	}
	a.mu.Unlock()
	a.gen.Add(1)
}

// Processes returns how many processes are connected.
func (a *Aggregator) Processes() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.procs)
}

// snapshotMaxAge is how old a published snapshot may get while nothing changes; past it a
// rebuild expires series of gone processes.
const snapshotMaxAge = 10 * time.Second

// Snapshot returns the current families. It rebuilds the snapshot only when something
// changed since the last one (or it is older than 10 s), holding the aggregation lock for
// the copy only (no I/O, no waiting on connections); otherwise it returns the published
// snapshot without locking.
func (a *Aggregator) Snapshot() *snapshot.Snapshot {
	if s := a.fresh(); s != nil {
		return s
	}
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	if s := a.fresh(); s != nil {
		return s
	}
	a.mu.Lock()
	g := a.gen.Load()
	s := a.buildLocked()
	a.mu.Unlock()
	a.snap.Store(s)
	a.snapGen.Store(g)
	return s
}

func (a *Aggregator) fresh() *snapshot.Snapshot {
	s := a.snap.Load()
	if s == nil || a.snapGen.Load() != a.gen.Load() || a.cfg.now().Sub(s.Time) >= snapshotMaxAge {
		return nil
	}
	return s
}

// expireLocked forgets per-pod series and sender states of processes gone for the TTL.
func (a *Aggregator) expireLocked(now time.Time) {
	ttl := a.cfg.seriesTTL
	for k, s := range a.podSeries {
		if s.refs <= 0 && now.Sub(s.last) >= ttl {
			delete(a.podSeries, k)
		}
	}
	for id, s := range a.senders {
		if s.conns <= 0 && now.Sub(s.seen) >= ttl {
			delete(a.senders, id)
		}
	}
	a.expireDevicesLocked(now)
	a.expirePodsLocked(now)
}

// expireDevicesLocked forgets devices no process has used for the TTL, with their series, and
// returns their memory to the budget: devices named by processes that are gone must not
// hold memory (or series) forever.
func (a *Aggregator) expireDevicesLocked(now time.Time) {
	gone := map[*device]bool{}
	for _, d := range a.devices {
		if !d.inUse() && now.Sub(d.last) >= a.cfg.seriesTTL {
			gone[d] = true
		}
	}
	a.forgetDevicesLocked(gone)
}

// forgetDevicesLocked removes devices from the table with their series and returns their
// memory to the budget; processes still holding one have its later records dropped
// (unknown_device).
func (a *Aggregator) forgetDevicesLocked(gone map[*device]bool) {
	if len(gone) == 0 {
		return
	}
	for d := range gone {
		delete(a.devices, deviceKey{d.gpu, d.uuid})
		for owner := range d.owners {
			a.ownLocked(d, owner, -d.owners[owner])
		}
		d.unknown = true
	}
	for k := range a.kernels.series {
		if gone[k.dev] {
			delete(a.kernels.series, k)
		}
	}
	for k := range a.podSeries {
		if gone[k.dev] {
			delete(a.podSeries, k)
		}
	}
	for k := range a.memcpy {
		if gone[k.dev] {
			delete(a.memcpy, k)
		}
	}
	for k := range a.memset {
		if gone[k.dev] {
			delete(a.memset, k)
		}
	}
	for k := range a.memcpyHist {
		if gone[k.dev] {
			delete(a.memcpyHist, k)
		}
	}
	for k := range a.memsetHist {
		if gone[k.dev] {
			delete(a.memsetHist, k)
		}
	}
	a.cfg.budget.Release(int64(len(gone)) * a.deviceStateBytes())
}
