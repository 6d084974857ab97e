package activity

import (
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// Each library of the table is recognised on names as CUPTI reports them (mangled, through
// ShortKernelName) or as they are (extern "C" kernels), and the usual compute kernels are not.
func TestCollectiveLibrary(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", "NCCL"},
		{"ncclDevKernel_Broadcast_RING_LL", "NCCL"},
		{"_Z42ncclSymkDevKernel_AllReduce_AGxLL_R_sum_f3221ncclSymkDevWorkArgs4K", "NCCL"},
		{"ncclKernel_AllReduce_RING_LL_Sum_half", "NCCL"},
		{"mscclKernel_Sum_half_LL128", "MSCCL"},
		{"_ZN7mscclpp15executionKernelIfEEviPT_S2_S2_", "MSCCL++"},
		{"nvshmemi_proxy_quiet_entrypoint", "NVSHMEM"},
		{"_ZN7deep_ep9intranode8dispatchILi8ELi768ELi8192EEEvP4int4PfPiPlS3_S4_S4_PKS1_PKfPKlS9_PKbPKiiiiiiiiii", "DeepEP"},
		{"_ZN7deep_ep12internode_ll7combineEv", "DeepEP"},
		{"_ZN12_GLOBAL__N_126one_shot_all_reduce_kernelIfLi16ELi8EEEvPPT_S2_S2_mmPPjmm", "PyTorch symmetric memory"},
		{"_ZN12_GLOBAL__N_126two_shot_all_reduce_kernelIfLi16ELi8ELb0ELb0EEEvPPT_S2_mmPPjmmm", "PyTorch symmetric memory"},
		{"_ZN4c10d15intra_node_comm29hybridCubeMeshAllReduceKernelEv", "PyTorch IntraNodeComm"},
		{"_ZN4vllm26cross_device_reduce_1stageIfLi8EEEvPNS_8RankDataENS_11RankSignalsEPNS_6SignalEPT_ii", "custom all-reduce (vLLM, SGLang)"},
		// compute kernels
		{"nvjet_sm90_tst_320x128_64x3_2x1_v_bz_coopA_NNN", ""},
		{"ampere_sgemm_128x64_nn", ""},
		{"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_", ""},
		{"_ZN7deep_ep6layout19get_dispatch_layoutEv", ""}, // DeepEP's local layout kernel computes
		{"_Z22gemm_with_nccl_helperv", ""},                // a name merely holding "nccl"
		{"_Z8myKernelI20ncclDevKernelArgs4KEvv", ""},      // nccl only inside the template arguments
		{"", ""},
	} {
		short := ShortKernelName(c.name)
		if got := CollectiveLibrary(short); got != c.want {
			t.Errorf("%s (short %q): library %q, want %q", c.name, short, got, c.want)
		}
	}
}

// The name cache gives each kernel name the class the table says, for new and repeated
// names, and a kernel the name table had no room for (no short name) is compute.
func TestKernelNameClass(t *testing.T) {
	c := newNameCache()
	for range 2 {
		if c.name("ncclDevKernel_AllGather_RING_LL").class != classComm || c.name("gemm").class != classCompute {
			t.Fatal("wrong class")
		}
	}
	a := NewAggregator()
	a.namesFull.Store(true)
	names := a.kernelNames([]record.Record{{Kind: record.KindKernel, Name: "ncclDevKernel_AllGather_RING_LL"}})
	if n := (*names)[0]; n.short != "" || n.class != classCompute {
		t.Errorf("name table full: %+v, want no short name and compute", n)
	}
}
