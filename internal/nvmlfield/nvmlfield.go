// Package nvmlfield decodes NVML field values (nvmlDeviceGetFieldValues), whose value is a
// union whose type the library names per field: the health source and the idle controller's
// instant power read them.
package nvmlfield

import (
	"encoding/binary"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Float returns v's value as a float64, and false for a value type it does not know.
func Float(v nvml.FieldValue) (float64, bool) {
	raw := v.Value[:]
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(raw)), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(raw)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(raw)), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(raw))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(raw))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(raw)), true
	}
	return 0, false
}

// Read reads one field of dev: its value, and NVML's return (of the call, else of the field;
// ERROR_NOT_SUPPORTED for a value type Float does not know).
func Read(dev nvml.Device, id uint32) (float64, nvml.Return) {
	var v [1]float64
	var r [1]nvml.Return
	ReadMany(dev, []uint32{id}, v[:], r[:])
	return v[0], r[0]
}

// ReadMany reads the fields ids of dev in one call (one driver round trip: the eight
// clock-event counters cost 0.9 ms of CPU together on an H100, 8 ms as eight calls of
// nvmlDeviceGetViolationStatus; docs/health.md). It fills vals and rets, one per id: a field's
// value and NVML's return for it. The call's own return is reported; when it fails, every
// field's return is that too.
func ReadMany(dev nvml.Device, ids []uint32, vals []float64, rets []nvml.Return) nvml.Return {
	fv := make([]nvml.FieldValue, len(ids))
	for i, id := range ids {
		fv[i].FieldId = id
	}
	ret := dev.GetFieldValues(fv)
	for i := range ids {
		vals[i], rets[i] = 0, ret
		if ret != nvml.SUCCESS {
			continue
		}
		if rets[i] = nvml.Return(fv[i].NvmlReturn); rets[i] != nvml.SUCCESS {
			continue
		}
		f, ok := Float(fv[i])
		if !ok {
			rets[i] = nvml.ERROR_NOT_SUPPORTED
			continue
		}
		vals[i] = f
	}
	return ret
}
