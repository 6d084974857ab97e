package activity

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
