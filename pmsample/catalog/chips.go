package catalog

import "strings"

// ChipInfo is what the project knows of a chip beyond its catalog: for users (docs/supported-gpus.md,
// `metrics chips`), not for planning, which reads everything from CUPTI.
type ChipInfo struct {
	Chip         string
	Architecture string
	GPUs         string // example products; empty where the project could not tell
	// Trigger is the PM sampling trigger the exporter ends up with: "GPU_TIME", or "SYSCLK"
	// where the device refuses GPU_TIME (Turing, GA100: the sampler falls back by itself),
	// or "none" where PM sampling needs a newer compute capability (7.5).
	Trigger string
	// Measured names the GPUs the exporter was validated on; empty: from the catalog only.
	Measured string
}

// Chips are the 30 chips CUPTI 13.0's host library lists (cuptiProfilerHostGetSupportedChips).
var Chips = []ChipInfo{
	{Chip: "GV100", Architecture: "Volta", GPUs: "V100, TITAN V", Trigger: "none"},
	{Chip: "GV11B", Architecture: "Volta", GPUs: "Jetson AGX Xavier", Trigger: "none"},
	{Chip: "TU102", Architecture: "Turing", GPUs: "RTX 2080 Ti, TITAN RTX, Quadro RTX 6000/8000", Trigger: "SYSCLK"},
	{Chip: "TU104", Architecture: "Turing", GPUs: "T4, RTX 2080/2070 SUPER, Quadro RTX 4000/5000", Trigger: "SYSCLK"},
	{Chip: "TU106", Architecture: "Turing", GPUs: "RTX 2070, RTX 2060", Trigger: "SYSCLK"},
	{Chip: "TU116", Architecture: "Turing", GPUs: "GTX 1660 family", Trigger: "SYSCLK"},
	{Chip: "TU117", Architecture: "Turing", GPUs: "GTX 1650, T400/T600/T1000", Trigger: "SYSCLK"},
	{Chip: "GA100", Architecture: "Ampere", GPUs: "A100, A30", Trigger: "SYSCLK"},
	{Chip: "GA102", Architecture: "Ampere", GPUs: "A10, A10G, A40, RTX A5000/A6000, RTX 3090/3080", Trigger: "GPU_TIME"},
	{Chip: "GA103", Architecture: "Ampere", GPUs: "RTX 3060 Ti (some), laptop RTX 3080 Ti", Trigger: "GPU_TIME"},
	{Chip: "GA104", Architecture: "Ampere", GPUs: "RTX A4000, RTX 3070, RTX 3060 Ti", Trigger: "GPU_TIME"},
	{Chip: "GA106", Architecture: "Ampere", GPUs: "RTX A2000, RTX 3060", Trigger: "GPU_TIME"},
	{Chip: "GA107", Architecture: "Ampere", GPUs: "A2, A16, RTX 3050", Trigger: "GPU_TIME"},
	{Chip: "GA10B", Architecture: "Ampere", GPUs: "Jetson AGX Orin", Trigger: "GPU_TIME"},
	{Chip: "GH100", Architecture: "Hopper", GPUs: "H100, H200, GH200", Trigger: "GPU_TIME", Measured: "H100, H200"},
	{Chip: "AD102", Architecture: "Ada", GPUs: "L40S, L40, RTX 6000 Ada, RTX 4090", Trigger: "GPU_TIME"},
	{Chip: "AD103", Architecture: "Ada", GPUs: "RTX 4080", Trigger: "GPU_TIME"},
	{Chip: "AD104", Architecture: "Ada", GPUs: "L4, RTX 4070 Ti, RTX 4070", Trigger: "GPU_TIME"},
	{Chip: "AD106", Architecture: "Ada", GPUs: "RTX 4060 Ti", Trigger: "GPU_TIME"},
	{Chip: "AD107", Architecture: "Ada", GPUs: "RTX 4060, RTX 2000 Ada", Trigger: "GPU_TIME"},
	{Chip: "GB100", Architecture: "Blackwell", GPUs: "B200, GB200", Trigger: "GPU_TIME"},
	{Chip: "GB102", Architecture: "Blackwell", Trigger: "GPU_TIME"},
	{Chip: "GB110", Architecture: "Blackwell", Trigger: "GPU_TIME"},
	{Chip: "GB10B", Architecture: "Blackwell", Trigger: "GPU_TIME"},
	{Chip: "GB202", Architecture: "Blackwell", GPUs: "RTX PRO 6000 Blackwell, RTX 5090", Trigger: "GPU_TIME"},
	{Chip: "GB203", Architecture: "Blackwell", GPUs: "RTX 5080, RTX 5070 Ti", Trigger: "GPU_TIME"},
	{Chip: "GB205", Architecture: "Blackwell", GPUs: "RTX 5070", Trigger: "GPU_TIME"},
	{Chip: "GB206", Architecture: "Blackwell", GPUs: "RTX 5060 Ti, RTX 5060", Trigger: "GPU_TIME"},
	{Chip: "GB207", Architecture: "Blackwell", GPUs: "RTX 5050", Trigger: "GPU_TIME"},
	{Chip: "GB20B", Architecture: "Blackwell", Trigger: "GPU_TIME"},
}

// ChipFacts returns what the project knows of chip (Architecture "unknown" for a chip newer than
// this table).
func ChipFacts(chip string) ChipInfo {
	for _, c := range Chips {
		if strings.EqualFold(c.Chip, chip) {
			return c
		}
	}
	return ChipInfo{Chip: chip, Architecture: "unknown", Trigger: "GPU_TIME"}
}
