/* launch_cbids.h: the CUPTI API calls that submit GPU work (kernel and graph launches,
 * copies, memsets), by callback id: CUpti_driver_api_trace_cbid and
 * CUpti_runtime_api_trace_cbid values, which NVIDIA keeps stable. An X-macro, so that
 * launch.c builds its tables from it and scripts/gpu/cbid_check.c checks every value
 * against the machine's real CUPTI headers. Host functions (cuLaunchHostFunc) and graph
 * instantiation are left out: they put no work on the GPU. */
#ifndef CX_LAUNCH_CBIDS_H
#define CX_LAUNCH_CBIDS_H

#define CX_DRIVER_WORK_CBIDS(X)                 \
	X(cuLaunch, 115)                        \
	X(cuLaunchGrid, 116)                    \
	X(cuLaunchGridAsync, 117)               \
	X(cuMemsetD8Async, 216)                 \
	X(cuMemsetD16Async, 218)                \
	X(cuMemsetD32Async, 220)                \
	X(cuMemsetD8_v2, 249)                   \
	X(cuMemsetD16_v2, 250)                  \
	X(cuMemsetD32_v2, 251)                  \
	X(cuMemcpyHtoD_v2, 276)                 \
	X(cuMemcpyHtoDAsync_v2, 277)            \
	X(cuMemcpyDtoH_v2, 278)                 \
	X(cuMemcpyDtoHAsync_v2, 279)            \
	X(cuMemcpyDtoD_v2, 280)                 \
	X(cuMemcpyDtoDAsync_v2, 281)            \
	X(cuMemcpy, 305)                        \
	X(cuMemcpyAsync, 306)                   \
	X(cuLaunchKernel, 307)                  \
	X(cuMemcpyPeer, 318)                    \
	X(cuMemcpyPeerAsync, 319)               \
	X(cuMemcpyHtoD_v2_ptds, 397)            \
	X(cuMemcpyDtoH_v2_ptds, 398)            \
	X(cuMemcpyDtoD_v2_ptds, 399)            \
	X(cuMemcpy_ptds, 408)                   \
	X(cuMemcpyPeer_ptds, 409)               \
	X(cuMemsetD8_v2_ptds, 411)              \
	X(cuMemsetD16_v2_ptds, 412)             \
	X(cuMemsetD32_v2_ptds, 413)             \
	X(cuMemcpyAsync_ptsz, 418)              \
	X(cuMemcpyHtoDAsync_v2_ptsz, 421)       \
	X(cuMemcpyDtoHAsync_v2_ptsz, 422)       \
	X(cuMemcpyDtoDAsync_v2_ptsz, 423)       \
	X(cuMemcpyPeerAsync_ptsz, 426)          \
	X(cuMemsetD8Async_ptsz, 428)            \
	X(cuMemsetD16Async_ptsz, 429)           \
	X(cuMemsetD32Async_ptsz, 430)           \
	X(cuLaunchKernel_ptsz, 442)             \
	X(cuLaunchCooperativeKernel, 477)       \
	X(cuLaunchCooperativeKernel_ptsz, 478)  \
	X(cuLaunchCooperativeKernelMultiDevice, 480) \
	X(cuGraphLaunch, 514)                   \
	X(cuGraphLaunch_ptsz, 515)              \
	X(cuLaunchKernelEx, 652)                \
	X(cuLaunchKernelEx_ptsz, 653)

#define CX_RUNTIME_WORK_CBIDS(X)                        \
	X(cudaLaunch_v3020, 13)                         \
	X(cudaMemcpy_v3020, 31)                         \
	X(cudaMemcpyAsync_v3020, 41)                    \
	X(cudaMemset_v3020, 49)                         \
	X(cudaMemsetAsync_v3020, 51)                    \
	X(cudaMemcpyPeer_v4000, 160)                    \
	X(cudaMemcpyPeerAsync_v4000, 161)               \
	X(cudaLaunchKernel_v7000, 211)                  \
	X(cudaLaunchKernel_ptsz_v7000, 214)             \
	X(cudaMemcpy_ptds_v7000, 215)                   \
	X(cudaMemcpyAsync_ptsz_v7000, 225)              \
	X(cudaMemset_ptds_v7000, 233)                   \
	X(cudaMemsetAsync_ptsz_v7000, 235)              \
	X(cudaLaunchCooperativeKernel_v9000, 269)       \
	X(cudaLaunchCooperativeKernel_ptsz_v9000, 270)  \
	X(cudaLaunchCooperativeKernelMultiDevice_v9000, 272) \
	X(cudaGraphLaunch_v10000, 311)                  \
	X(cudaGraphLaunch_ptsz_v10000, 312)             \
	X(cudaLaunchKernelExC_v11060, 430)              \
	X(cudaLaunchKernelExC_ptsz_v11060, 431)

#endif
