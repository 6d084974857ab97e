package activity

import "strings"

// Collective-communication kernels are recognised by name (their short name, ShortKernelName),
// through the table below: docs/training.md lists it with where each name comes from. A kernel
// that matches no rule is a compute kernel.

// workClass is what a record kept the GPU doing, for the per-pod time split (timesplit.go).
type workClass uint8

const (
	classCompute workClass = iota // a kernel that is not a collective
	classComm                     // a collective-communication kernel, or a peer-to-peer copy
	classCopy                     // a copy (other than peer to peer) or a fill
	numClasses
)

// collectiveRule recognises the kernels of one library: a short name whose qualified name
// (template arguments and parameters cut, a leading "::" of the anonymous namespace dropped)
// starts with prefix, or, with ident set, whose identifier (the qualified name's last
// component) starts with it.
type collectiveRule struct {
	library string
	prefix  string
	ident   bool
}

// collectiveRules is the table of collective-communication kernels (docs/training.md,
// "Which kernels are communication").
var collectiveRules = []collectiveRule{
	{"NCCL", "ncclDevKernel_", false},     // NCCL 2.19 and later: ncclDevKernel_AllReduce_Sum_f32_RING_LL
	{"NCCL", "ncclSymkDevKernel_", false}, // NCCL 2.27 and later, symmetric-memory kernels
	{"NCCL", "ncclKernel_", false},        // NCCL before 2.19, and MSCCL (a fork of NCCL)
	{"MSCCL", "mscclKernel_", false},
	{"MSCCL++", "mscclpp::", false},
	{"NVSHMEM", "nvshmemi_", false}, // NVSHMEM's own kernels (on-stream collectives, proxy, barrier)
	{"NVSHMEM", "nvshmemx_", false},
	{"DeepEP", "deep_ep::intranode::", false},
	{"DeepEP", "deep_ep::internode::", false},
	{"DeepEP", "deep_ep::internode_ll::", false},
	// PyTorch symmetric memory (torch.distributed._symmetric_memory, CUDASymmetricMemoryOps.cu)
	{"PyTorch symmetric memory", "one_shot_all_reduce", true},
	{"PyTorch symmetric memory", "two_shot_all_reduce", true},
	{"PyTorch symmetric memory", "multimem_all_reduce", true},
	{"PyTorch symmetric memory", "multimem_one_shot_all_reduce", true},
	{"PyTorch symmetric memory", "multimem_all_gather", true},
	// PyTorch IntraNodeComm (torch 2.2 to 2.5, intra_node_comm.cu)
	{"PyTorch IntraNodeComm", "oneShotAllReduceKernel", true},
	{"PyTorch IntraNodeComm", "twoShotAllReduceKernel", true},
	{"PyTorch IntraNodeComm", "hybridCubeMeshAllReduceKernel", true},
	// The custom all-reduce of vLLM, SGLang and AITER: cross_device_reduce_1stage, _2stage
	{"custom all-reduce (vLLM, SGLang)", "cross_device_reduce_", true},
}

// CollectiveLibrary returns the library whose collective-communication kernel the short
// kernel name (ShortKernelName) names, or "" for any other kernel.
func CollectiveLibrary(short string) string {
	q := short
	if i := strings.IndexAny(q, "<("); i >= 0 {
		q = q[:i]
	}
	q = strings.TrimPrefix(q, "::")
	id := q
	if i := strings.LastIndex(id, "::"); i >= 0 {
		id = id[i+2:]
	}
	for _, r := range collectiveRules {
		s := q
		if r.ident {
			s = id
		}
		if strings.HasPrefix(s, r.prefix) {
			return r.library
		}
	}
	return ""
}
