package activity

import (
	"strings"
	"testing"
)

func TestShortKernelName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"_Z4busyPfii", "busy"},
		{"_ZN3foo3barEv", "foo::bar"},
		{"ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"},
		{"", "unknown"},
		{ // PyTorch: nested template arguments dropped
			"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_",
			"at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor, at::detail::Array>",
		},
		{ // CUTLASS: the kernel's own template argument stays, its arguments go
			"_ZN7cutlass6KernelINS_4gemm6kernel4GemmINS1_11threadblock12MmaPipelinedINS1_9GemmShapeILi128ELi128ELi8EEEEEEEEEvNT_6ParamsE",
			"cutlass::Kernel<cutlass::gemm::kernel::Gemm>",
		},
		{ // PyTorch lambdas: enclosing parameter lists dropped
			"_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE8_clEvEUlfE_EEvS4_RKT_EUliE_EEviT1_",
			"at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast::{lambda#1}>",
		},
		{"_ZN3fooltI3barEEvv", "foo::operator< <bar>"}, // operator< is not a template bracket
	} {
		if got := ShortKernelName(tc.in); got != tc.want {
			t.Errorf("ShortKernelName(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestShortKernelNameBounded(t *testing.T) {
	long := strings.Repeat("very_long_kernel_name_", 20) + "é"
	got := ShortKernelName(long)
	if len(got) > maxKernelNameLen || !strings.HasSuffix(got, "...") {
		t.Errorf("ShortKernelName of %d bytes = %q (%d bytes), want <= %d ending in ...", len(long), got, len(got), maxKernelNameLen)
	}
	if got := ShortKernelName("bad\xffname"); got != "bad?name" {
		t.Errorf("invalid UTF-8 kept: %q", got)
	}
}
