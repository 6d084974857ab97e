# cupti-exporter. `make test` is exactly what CI runs (.ci/run).
GO ?= go
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build test demo docs synthetic clean

all: build

build:
	$(GO) build -o cupti-exporter ./cmd/cupti-exporter

test:
	bash .ci/run

demo:
	$(GO) run ./cmd/cupti-exporter --demo

# Regenerate generated documentation (configuration and metrics references).
docs:
	$(GO) test ./cmd/cupti-exporter -run TestConfigurationDoc -update
	$(GO) test ./e2e -run TestMetricsDoc -update

# A synthetic two-GPU recording (the embedded demo is a real H200 run): replay it with
# `go run ./cmd/cupti-exporter replay synthetic.cuptirec --replay.loop`.
synthetic:
	$(GO) run ./recording/internal/gensynthetic -o synthetic.cuptirec

clean:
	rm -f cupti-exporter
