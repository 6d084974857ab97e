package activity

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Pod names the Kubernetes container a process runs in, as a pod resolver answers it.
type Pod struct {
	Name, Namespace, Container string
}

// PodState is how sure a pod resolver is of its answer.
type PodState int

const (
	// PodNotFound: the process is in no pod the resolver can see (its cgroup names none).
	// Final: the hello's downward-API values, if any, label the process.
	PodNotFound PodState = iota
	// PodFound: the answer is the process's pod.
	PodFound
	// PodPending: the process is in a pod the resolver does not know yet (a cache not yet
	// synced, a container the kubelet has not reported yet). The Aggregator asks again on
	// later records, every retry interval until the retry window ends (WithPodRetry);
	// meanwhile the hello's values, else the partial answer, label the process.
	PodPending
)

// PodResolver answers which pod a process runs in from its pid (in its own PID namespace)
// and the cgroup text of its hello. It must not block: it is called outside the
// Aggregator's lock, but on the connection's goroutine.
type PodResolver func(pid uint32, cgroup string) (Pod, PodState)

// Defaults of WithPodRetry.
const (
	DefaultPodRetryInterval = time.Second
	DefaultPodRetryWindow   = 30 * time.Second
)

// WithPodRetry sets how often (default 1 s) and for how long after a process connects
// (default 30 s) a pending pod answer is asked again. A non-positive value keeps the
// default.
func WithPodRetry(interval, window time.Duration) Option {
	return func(c *config) {
		if interval > 0 {
			c.podRetryInterval = interval
		}
		if window > 0 {
			c.podRetryWindow = window
		}
	}
}

// podID is the namespace, pod and container labels of a series.
type podID struct{ namespace, pod, container string }

// podRef is an interned podID: series keys hold the pointer. procs counts the connected
// processes labelled with it; series of a pod with none expire after the series TTL.
type podRef struct {
	podID
	procs int
	// prio is how its series rank under the exporter's cardinality cap: verified once the
	// kernel's cgroup of some process named it, claimed while only hellos did.
	prio snapshot.Priority
}

// podPriority ranks labels decided by result for a process of identity id: labels the pod
// resolver found from the kernel's cgroup are verified, a recording's are taken as given,
// others speak only for a hello.
func podPriority(result string, id record.Identity) snapshot.Priority {
	switch {
	case result == resolvedCgroup || result == resolvedCgroupLate:
		return snapshot.PriorityVerified
	case id == record.IdentityUnchecked:
		return snapshot.PriorityNormal
	}
	return snapshot.PriorityClaimed
}

// How a connection's pod labels were decided (cupti_activity_pod_resolutions_total).
const (
	resolvedCgroup     = "cgroup"      // the pod resolver found it when the process connected
	resolvedCgroupLate = "cgroup_late" // found on a retry; the records before went to other labels
	resolvedHello      = "hello"       // the hello's POD_NAME/POD_NAMESPACE(/CONTAINER_NAME), trusted
	resolvedNone       = "none"        // no pod: empty labels
	resolvedTimedOut   = "timed_out"   // still pending at the end of the retry window
	// the hello named a pod that nothing could check, and hellos are not trusted
	// (WithTrustHelloPods): empty labels
	resolvedUnverified = "unverified"
)

var podResolutionResults = []string{resolvedCgroup, resolvedCgroupLate, resolvedHello, resolvedNone, resolvedTimedOut, resolvedUnverified}

var podResolutionsDesc = descs.Counter("cupti_activity_pod_resolutions_total", "", "cupti.activity.pod_resolutions", "{connection}", "Traced-process connections by how their pod labels were decided (cgroup: by the pod resolver; cgroup_late: by the resolver on a retry; hello: the process's POD_NAME/POD_NAMESPACE, trusted; none; timed_out: the resolver never knew the pod; unverified: the hello named a pod nothing could check, labels left empty).", "result")

// WithTrustHelloPods labels processes with the pod their hello names (POD_NAME,
// POD_NAMESPACE, CONTAINER_NAME) when nothing can check it: no pod resolver, a resolver that
// finds no pod in the process's cgroup, or a process whose identity is only claimed. Without
// it such a hello's pod is not used (empty labels, counted as result="unverified"): the
// socket is open to every workload of the node, and any of them could name another pod. Set
// it where only trusted workloads reach the socket (a sidecar's socket in the pod's own
// volume). Processes of a recording (IdentityUnchecked) are always taken as recorded.
func WithTrustHelloPods(trust bool) Option {
	return func(c *config) { c.trustHelloPods = trust }
}

// helloPod is the pod a hello names: only when it has both POD_NAME and POD_NAMESPACE,
// so that a CONTAINER_NAME (or a stray POD_NAMESPACE) set outside Kubernetes adds no label.
func helloPod(p *record.Process) (podID, bool) {
	if p.Pod == "" || p.Namespace == "" {
		return podID{}, false
	}
	return podID{p.Namespace, p.Pod, p.Container}, true
}

// podAnswer is a pod decision made without the lock.
type podAnswer struct {
	id       podID
	pending  bool   // ask again
	result   string // when final
	mismatch bool   // the hello named another pod than the resolver found
}

// askPod runs the resolver (without the lock) and picks the labels: the resolver's answer,
// else the hello's when it may be trusted, else the resolver's partial answer, else none.
// The resolver reads the process's cgroup, which only a verified (or recorded) process has
// from the kernel: a claimed process's cgroup is its own text, and is not asked about.
func (a *Aggregator) askPod(p *record.Process) podAnswer {
	hello, helloOK := helloPod(p)
	trusted := a.cfg.trustHelloPods || p.Identity == record.IdentityUnchecked
	fallback := func(ans podAnswer) podAnswer {
		switch {
		case helloOK && trusted:
			ans.id, ans.result = hello, resolvedHello
		case helloOK && !ans.pending:
			ans.result = resolvedUnverified
		}
		return ans
	}
	if a.cfg.podResolver == nil || p.Identity == record.IdentityClaimed {
		return fallback(podAnswer{result: resolvedNone})
	}
	pod, state := a.cfg.podResolver(p.PID, p.Cgroup)
	id := podID{pod.Namespace, pod.Name, pod.Container}
	switch state {
	case PodFound:
		return podAnswer{id: id, result: resolvedCgroup,
			mismatch: helloOK && (hello.namespace != id.namespace || hello.pod != id.pod)}
	case PodPending:
		if pod.Name == "" || pod.Namespace == "" {
			id = podID{}
		}
		return fallback(podAnswer{id: id, pending: true})
	}
	return fallback(podAnswer{result: resolvedNone})
}

// internPodLocked returns the shared podRef of id.
func (a *Aggregator) internPodLocked(id podID) *podRef {
	r := a.pods[id]
	if r == nil {
		r = &podRef{podID: id, prio: snapshot.PriorityClaimed}
		if id == (podID{}) { // no pod: the series of every process outside pods
			r.prio = snapshot.PriorityNormal
		}
		a.pods[id] = r
	}
	return r
}

// rankPodLocked raises the rank of ps's pod labels by how they were decided.
func rankPodLocked(ps *procState, result string, id record.Identity) {
	ps.pod.prio = max(ps.pod.prio, podPriority(result, id))
}

// setPodLocked labels ps with id, releasing the pod series it cached under its old labels.
func (a *Aggregator) setPodLocked(ps *procState, id podID, now time.Time) {
	if ps.pod != nil {
		if ps.pod.podID == id {
			return
		}
		ps.pod.procs--
	}
	ps.pod = a.internPodLocked(id)
	ps.pod.procs++
	for i, s := range ps.pods {
		if s != nil {
			s.refs--
			s.last = now
			ps.pods[i] = nil
		}
	}
}

// startPodLocked applies the answer taken at connect time to the process of identity id.
func (a *Aggregator) startPodLocked(ps *procState, ans podAnswer, id record.Identity, now time.Time) {
	a.setPodLocked(ps, ans.id, now)
	rankPodLocked(ps, ans.result, id)
	if ans.mismatch {
		a.refusedClaims[[2]string{"pod", ClaimContradicted}]++
	}
	ps.podPending = ans.pending
	if ans.pending {
		ps.podRetry = now.Add(a.cfg.podRetryInterval)
		ps.podDeadline = now.Add(a.cfg.podRetryWindow)
		return
	}
	a.podResolutions[ans.result]++
}

// retryPodLocked asks the resolver again for a process whose answer was pending, when its
// retry time has come. It releases a.mu while the resolver and the listeners run.
func (a *Aggregator) retryPodLocked(p *record.Process, ps *procState, now time.Time) {
	if !ps.podPending || now.Before(ps.podRetry) {
		return
	}
	ps.podRetry = now.Add(a.cfg.podRetryInterval)
	a.mu.Unlock()
	ans := a.askPod(p)
	a.mu.Lock()
	if a.procs[p] != ps || !ps.podPending {
		return // disconnected or settled meanwhile
	}
	switch {
	case ans.pending && now.Before(ps.podDeadline):
		return
	case ans.pending:
		ps.podPending = false
		a.podResolutions[resolvedTimedOut]++
		return
	}
	ps.podPending = false
	if ans.mismatch {
		a.refusedClaims[[2]string{"pod", ClaimContradicted}]++
	}
	if ans.result == resolvedCgroup && ps.pod.podID != ans.id {
		ans.result = resolvedCgroupLate
	}
	a.podResolutions[ans.result]++
	if ps.pod.podID == ans.id {
		rankPodLocked(ps, ans.result, p.Identity)
		return
	}
	a.setPodLocked(ps, ans.id, now)
	rankPodLocked(ps, ans.result, p.Identity)
	a.gen.Add(1)
	if len(a.cfg.listeners) > 0 {
		info := ps.info(p)
		a.mu.Unlock()
		for _, l := range a.cfg.listeners {
			l.ProcessConnected(p, info) // a second call: the labels changed
		}
		a.mu.Lock()
	}
}

// expirePodsLocked forgets the workload series of pods with no connected process and no
// record for the series TTL, then the interned pods no series or process uses.
func (a *Aggregator) expirePodsLocked(now time.Time) {
	ttl := a.cfg.seriesTTL
	gone := func(pod *podRef, last time.Time) bool { return pod.procs <= 0 && now.Sub(last) >= ttl }
	used := make(map[*podRef]bool, len(a.pods))
	for k, s := range a.kernels.series {
		if gone(k.pod, s.last) {
			delete(a.kernels.series, k)
		} else {
			used[k.pod] = true
		}
	}
	for k, s := range a.memcpy {
		if gone(k.pod, s.last) {
			delete(a.memcpy, k)
		} else {
			used[k.pod] = true
		}
	}
	for k, s := range a.memset {
		if gone(k.pod, s.last) {
			delete(a.memset, k)
		} else {
			used[k.pod] = true
		}
	}
	for k, s := range a.memcpyHist {
		if gone(k.pod, s.last) {
			delete(a.memcpyHist, k)
		}
	}
	for k, s := range a.memsetHist {
		if gone(k.pod, s.last) {
			delete(a.memsetHist, k)
		}
	}
	for k := range a.podSeries {
		used[k.pod] = true
	}
	for id, r := range a.pods {
		if r.procs <= 0 && !used[r] {
			delete(a.pods, id)
		}
	}
}

// podResolutionFamily is cupti_activity_pod_resolutions_total.
func (a *Aggregator) podResolutionFamily() snapshot.Family {
	f := snapshot.Family{Desc: podResolutionsDesc}
	for _, r := range podResolutionResults {
		f.Samples = append(f.Samples, a.counter(float64(a.podResolutions[r]), r))
	}
	return f
}
