package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func launchPayload(ts uint64, api, cbid uint32) []byte {
	b := le.AppendUint64(nil, ts)
	b = le.AppendUint32(b, api)
	return le.AppendUint32(b, cbid)
}

// A launch frame round-trips through the encoder and decoder between records.
func TestLaunchRoundTrip(t *testing.T) {
	want := Launch{Time: 1_800_000_000_123_456_789, API: LaunchDriver, CBID: 307}
	stream := encodeStream(t, func(e *Encoder) error {
		return errors.Join(e.Hello(testProcess), e.Records(0, testRecords[:1]), e.Launch(want), e.Goodbye(1, Drops{}))
	})
	d, msgs := decodeAll(t, stream)
	var got []Launch
	for _, m := range msgs {
		if m.Type == FrameLaunch {
			got = append(got, m.Launch)
		}
	}
	if len(got) != 1 || got[0] != want || d.Version() != 3 {
		t.Fatalf("launches %+v (version %d), want [%+v] (version 3)", got, d.Version(), want)
	}
	var buf bytes.Buffer
	e, err := NewEncoderVersion(&buf, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Launch(want); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Launch on a version-2 encoder: %v, want ErrUnsupportedVersion", err)
	}
}

func TestLaunchRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream []byte
		msg    string
	}{
		{"in version 2", cat(hello(), AppendFrameVersion(nil, 2, FrameLaunch, launchPayload(5, LaunchDriver, 307))), "version 2 on a version-3 connection"},
		{"in a version-2 connection", cat(helloVersion(2), AppendFrameVersion(nil, 2, FrameLaunch, launchPayload(5, LaunchDriver, 307))), "unknown type 7 in version 2"},
		{"short", cat(hello(), frame(FrameLaunch, launchPayload(5, LaunchDriver, 307)[:15])), "payload 15 bytes, want 16"},
		{"long", cat(hello(), frame(FrameLaunch, append(launchPayload(5, LaunchDriver, 307), 0))), "payload 17 bytes, want 16"},
		{"time 0", cat(hello(), frame(FrameLaunch, launchPayload(0, LaunchDriver, 307))), "time 0"},
		{"api", cat(hello(), frame(FrameLaunch, launchPayload(5, 10, 307))), "api 10, want 4 (driver) or 5 (runtime)"},
		{"before hello", frame(FrameLaunch, launchPayload(5, LaunchDriver, 307)), "before hello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(bytes.NewReader(tc.stream))
			var err error
			for err == nil {
				_, err = d.Next()
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want a malformed frame containing %q", err, tc.msg)
			}
		})
	}
}
