package wire

// CountRecords returns how many records the complete records frames at the start of b
// hold (a refused connection's unread bytes), stopping at the first bytes that are not a
// whole valid frame header and payload. It reads each header once: linear in len(b).
func CountRecords(b []byte) uint64 {
	var n uint64
	for len(b) >= HeaderSize {
		if le.Uint32(b) != Magic || b[4] < MinVersion || b[4] > Version {
			break
		}
		size := le.Uint32(b[8:])
		if size > MaxPayload || uint64(len(b)-HeaderSize) < uint64(size) {
			break
		}
		p := b[HeaderSize : HeaderSize+int(size)]
		if FrameType(b[5]) == FrameRecords && len(p) >= recordsHeader {
			n += uint64(min(le.Uint32(p[8:]), uint32(len(p)/RecordSize)))
		}
		b = b[HeaderSize+int(size):]
	}
	return n
}
