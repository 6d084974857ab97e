package nvmlfield

import (
	"encoding/binary"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// TestReadMany checks that one call reads every field, each with its own return and value
// type, and that a failed call fails every field; and Read, ReadMany of one field, likewise.
func TestReadMany(t *testing.T) {
	calls := 0
	fail := nvml.SUCCESS
	dev := &mock.Device{GetFieldValuesFunc: func(v []nvml.FieldValue) nvml.Return {
		calls++
		for i := range v {
			switch v[i].FieldId {
			case 74: // a counter in ns, as driver 580 serves the clock-event fields
				v[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(v[i].Value[:], 163551050912)
			case 82:
				v[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				binary.LittleEndian.PutUint32(v[i].Value[:], 51)
			case 269:
				v[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			case 300:
				v[i].ValueType = 99 // a type Float does not know
			}
		}
		return fail
	}}
	ids := []uint32{74, 82, 269, 300}
	vals, rets := make([]float64, 4), make([]nvml.Return, 4)
	if ret := ReadMany(dev, ids, vals, rets); ret != nvml.SUCCESS || calls != 1 {
		t.Fatalf("ReadMany: %v after %d calls, want SUCCESS after 1", ret, calls)
	}
	wantV := []float64{163551050912, 51, 0, 0}
	wantR := []nvml.Return{nvml.SUCCESS, nvml.SUCCESS, nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED}
	for i := range ids {
		if vals[i] != wantV[i] || rets[i] != wantR[i] {
			t.Errorf("field %d: %v, %v; want %v, %v", ids[i], vals[i], rets[i], wantV[i], wantR[i])
		}
	}
	if v, r := Read(dev, 82); v != 51 || r != nvml.SUCCESS {
		t.Errorf("Read(82) = %v, %v; want 51, SUCCESS", v, r)
	}
	if _, r := Read(dev, 269); r != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("Read(269) = %v, want the field's NOT_SUPPORTED", r)
	}
	fail = nvml.ERROR_GPU_IS_LOST
	if _, r := Read(dev, 82); r != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("Read on a lost GPU = %v, want the call's GPU_IS_LOST", r)
	}
	if ret := ReadMany(dev, ids, vals, rets); ret != nvml.ERROR_GPU_IS_LOST {
		t.Fatalf("ReadMany on a lost GPU: %v", ret)
	}
	for i := range ids {
		if vals[i] != 0 || rets[i] != nvml.ERROR_GPU_IS_LOST {
			t.Errorf("lost GPU, field %d: %v, %v; want 0, GPU_IS_LOST", ids[i], vals[i], rets[i])
		}
	}
}
