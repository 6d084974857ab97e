// Package record holds the records traced processes send (kernels, memcpys, memsets), the
// hello a process introduces itself with, and the spans it traced: the data model the wire
// format, the socket receiver, the activity aggregator, the attribution join and the
// recordings share. It imports nothing of the project.
package record

import "fmt"

// Kind is the kind of an activity record.
type Kind uint8

const (
	KindKernel Kind = 1
	KindMemcpy Kind = 2
	KindMemset Kind = 3
)

// CopyKind mirrors CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...).
type CopyKind uint8

// MemoryKind mirrors CUpti_ActivityMemoryKind (1 pageable, 2 pinned, 3 device, 5 managed, ...).
type MemoryKind uint8

// Record is one decoded activity record, as the receiver and the recordings hold it.
type Record struct {
	Kind       Kind       `json:"kind"`
	Device     uint32     `json:"device"` // CUDA device ordinal in the sending process (PtoP: the destination)
	Stream     uint32     `json:"stream"`
	Start      uint64     `json:"start"` // ns, CUPTI time base (Unix epoch on Linux)
	End        uint64     `json:"end"`
	Bytes      uint64     `json:"bytes,omitempty"`       // memcpy, memset
	CopyKind   CopyKind   `json:"copy_kind,omitempty"`   // memcpy
	SrcKind    MemoryKind `json:"src_kind,omitempty"`    // memcpy
	DstKind    MemoryKind `json:"dst_kind,omitempty"`    // memcpy
	MemoryKind MemoryKind `json:"memory_kind,omitempty"` // memset
	SrcDevice  uint32     `json:"src_device,omitempty"`  // memcpy of copy kind 10 (PtoP): source device ordinal
	Name       string     `json:"name,omitempty"`        // kernel (mangled, as CUPTI gives it)
}

// Process is what an injected process says about itself in its hello frame, with what the
// receiver checked (Identity): for a verified process PID, StartTime and Cgroup are the
// kernel's (PID as the exporter's PID namespace sees it).
type Process struct {
	PID          uint32   `json:"pid"`
	StartTime    uint64   `json:"start_time"` // ns since the Unix epoch
	Executable   string   `json:"executable"`
	Cgroup       string   `json:"cgroup"`
	CUDAVersion  uint32   `json:"cuda_version"`
	CUPTIVersion uint32   `json:"cupti_version"`
	DeviceUUIDs  []string `json:"device_uuids"` // index = CUDA ordinal in that process
	Pod          string   `json:"pod,omitempty"`
	Namespace    string   `json:"namespace,omitempty"`
	Container    string   `json:"container,omitempty"`
	Identity     Identity `json:"identity,omitempty"`
}

// Identity says how far the exporter could check who a connected process is. The socket is
// open to every workload of the node, so what a hello says is a claim: the receiver asks the
// kernel who is at the other end (SO_PEERCRED) and reads the process's /proc entry itself
// (activity/receiver, docs/security.md).
type Identity uint8

const (
	// IdentityUnchecked: the process did not come through the socket (a recording replays
	// what was recorded; tests). Taken as given.
	IdentityUnchecked Identity = iota
	// IdentityVerified: the kernel named the process and its /proc entry agrees with the
	// hello. PID, StartTime and Cgroup are the kernel's, not the hello's.
	IdentityVerified
	// IdentityClaimed: the kernel could not name the process (it runs in a PID namespace the
	// exporter does not see, or its /proc entry could not be read): only its hello says who
	// it is. Its cgroup is not used, and its pod labels only with activity.WithTrustHelloPods.
	IdentityClaimed
)

var identityNames = [...]string{IdentityUnchecked: "", IdentityVerified: "verified", IdentityClaimed: "claimed"}

func (i Identity) String() string {
	if int(i) < len(identityNames) {
		return identityNames[i]
	}
	return fmt.Sprintf("Identity(%d)", uint8(i))
}

// MarshalText writes the identity as recordings keep it ("verified", "claimed").
func (i Identity) MarshalText() ([]byte, error) {
	if int(i) >= len(identityNames) {
		return nil, fmt.Errorf("unknown identity %d", uint8(i))
	}
	return []byte(identityNames[i]), nil
}

// UnmarshalText reads what MarshalText wrote.
func (i *Identity) UnmarshalText(b []byte) error {
	for v, name := range identityNames {
		if string(b) == name {
			*i = Identity(v)
			return nil
		}
	}
	return fmt.Errorf("unknown identity %q", b)
}

// Interval is a span of time during which a traced process recorded its activity, on the
// CUPTI time base (ns, Unix epoch on Linux). The injection library reports them so that
// consumers can tell time it traced (no kernel there means no kernel ran) from time it did
// not trace (duty cycle off, not yet started, disconnected).
type Interval struct {
	Start uint64 `json:"start"`
	End   uint64 `json:"end"`
	// Lossy is set when records of this span were lost (queue full, CUPTI drops, a broken
	// connection): the span was traced, but not completely.
	Lossy bool `json:"lossy,omitempty"`
}
