package wire

import (
	"errors"
	"strconv"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// Format constants; see docs/wire-format.md.
const (
	Version        = 3          // wire version the Encoder writes
	MinVersion     = 1          // oldest wire version the Decoder accepts
	Magic          = 0x57415843 // "CXAW" as little-endian bytes
	HeaderSize     = 12         // bytes of a frame header
	MaxPayload     = 1 << 20    // bytes of one frame payload
	MaxString      = 4096       // bytes of one string
	MaxNameID      = 65535      // highest string id (0 = no name)
	MaxStringBytes = 16 << 20   // string-table bytes per connection
	MaxDevices     = 64         // device UUIDs in hello
	MaxDropReasons = 64         // counters in a drops or goodbye frame
	RecordSize     = 48         // bytes of a version-1 record
	recordsHeader  = 16         // bytes before the records of a records frame
	// MaxRecordsPerFrame is the most version-1 records one frame can hold.
	MaxRecordsPerFrame = (MaxPayload - recordsHeader) / RecordSize
	SpanSize           = 24 // bytes of one coverage span
	coverageHeader     = 8  // bytes before the spans of a coverage frame
	// MaxSpansPerFrame is the most coverage spans one frame can hold.
	MaxSpansPerFrame = (MaxPayload - coverageHeader) / SpanSize
	// SpanLossy is the flag bit of a span during which records were lost.
	SpanLossy = 1
	// LaunchSize is the payload of a launch frame.
	LaunchSize = 16
)

// FrameType is the type byte of a frame header.
type FrameType uint8

// Frame types.
const (
	FrameHello   FrameType = 1
	FrameStrings FrameType = 2
	FrameRecords FrameType = 3
	FrameDrops   FrameType = 4
	FrameGoodbye FrameType = 5
	// FrameCoverage (version 2) carries the spans of time the sender traced.
	FrameCoverage FrameType = 6
	// FrameLaunch (version 3) says the sender submitted GPU work after a quiet spell.
	FrameLaunch FrameType = 7
)

// lastFrame is the highest frame type of wire version v.
func lastFrame(v uint8) FrameType {
	switch {
	case v >= 3:
		return FrameLaunch
	case v == 2:
		return FrameCoverage
	}
	return FrameGoodbye
}

func (t FrameType) String() string {
	switch t {
	case FrameHello:
		return "hello"
	case FrameStrings:
		return "strings"
	case FrameRecords:
		return "records"
	case FrameDrops:
		return "drops"
	case FrameGoodbye:
		return "goodbye"
	case FrameCoverage:
		return "coverage"
	case FrameLaunch:
		return "launch"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// DropReason indexes the sender's drop counters.
type DropReason int

// Drop reasons, in wire order.
const (
	DropBufferPoolExhausted DropReason = iota // CUPTI buffer requests refused (pool empty)
	DropQueueFull                             // records not sent: exporter absent or too slow
	DropCUPTI                                 // records CUPTI reported dropped
	DropVersionRefused                        // 1 when the process refused an unknown CUPTI version
	DropUnknownRecord                         // records skipped: unknown kind or unreadable
	DropNameTableFull                         // kernel records sent without a name
	NumDropReasons                            // number of reasons this package knows
)

var dropReasonNames = [NumDropReasons]string{
	"buffer_pool_exhausted", "queue_full", "cupti_dropped", "version_refused", "unknown_record", "name_table_full",
}

// String returns the reason's label value, e.g. "queue_full".
func (r DropReason) String() string {
	if r >= 0 && r < NumDropReasons {
		return dropReasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// Drops holds the sender's cumulative drop counters, indexed by DropReason.
type Drops [NumDropReasons]uint64

// Total is the sum over all reasons.
func (d *Drops) Total() uint64 {
	var t uint64
	for _, v := range d {
		t += v
	}
	return t
}

// Message is one decoded frame that carries information for the receiver.
// Strings frames only update the decoder's string table and are not returned.
type Message struct {
	Type FrameType
	// Process is set for FrameHello.
	Process record.Process
	// Records holds a FrameRecords batch with names resolved. With ReadInto
	// the slice is reused by the next call.
	Records []record.Record
	// DropTotal is the sender's cumulative drop total (all reasons), carried
	// by every FrameRecords frame; for FrameDrops and FrameGoodbye it is
	// Drops.Total() over the reasons this package knows.
	DropTotal uint64
	// Drops holds the cumulative counters of FrameDrops and FrameGoodbye.
	Drops Drops
	// SentRecords is the total the process sent, from FrameGoodbye.
	SentRecords uint64
	// Coverage holds the spans of a FrameCoverage frame, in time order. With
	// ReadInto the slice is reused by the next call.
	Coverage []record.Interval
	// Launch is the call of a FrameLaunch frame.
	Launch Launch
}

// Launch is the first API call that submitted GPU work after the sender's quiet spell
// (a kernel or graph launch, a copy, a memset), seen before the GPU ran it.
type Launch struct {
	Time uint64 // start of the call, ns on the CUPTI clock (as records)
	API  uint32 // the CUPTI activity kind of the call's record: 4 driver, 5 runtime
	CBID uint32 // its CUPTI callback id (cupti_driver_cbid.h, cupti_runtime_cbid.h)
}

// Launch APIs: the CUPTI activity kinds of a launch frame's call.
const (
	LaunchDriver  = 4
	LaunchRuntime = 5
)

// Errors. Decoding errors wrap one of these with the frame and field at fault.
var (
	// ErrMalformed marks a frame that breaks docs/wire-format.md.
	ErrMalformed = errors.New("malformed frame")
	// ErrBadMagic marks a stream that does not start frames with the magic.
	ErrBadMagic = errors.New("bad magic (not a cupti-exporter activity stream)")
	// ErrUnsupportedVersion marks a frame of a wire version this package does not speak.
	ErrUnsupportedVersion = errors.New("unsupported wire version (upgrade the exporter)")
	// ErrTooLarge marks a frame, string or table over the documented limits.
	ErrTooLarge = errors.New("over the wire-format limit")
)

// copyPtoP is the copy kind of peer-to-peer copies (CUpti_ActivityMemcpyKind PTOP); only
// their records carry a source device (record offset 44).
const copyPtoP record.CopyKind = 10

func validKind(k record.Kind) bool {
	return k == record.KindKernel || k == record.KindMemcpy || k == record.KindMemset
}
