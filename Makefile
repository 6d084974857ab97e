# cupti-exporter. `make test` is exactly what CI runs (.ci/run).
GO ?= go

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

# Regenerate the embedded synthetic demo recording.
synthetic:
	$(GO) run ./recording/internal/gensynthetic -o recording/demo/demo.cuptirec

clean:
	rm -f cupti-exporter
