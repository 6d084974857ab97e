# cupti-exporter. `make test` is exactly what CI runs (.ci/run).
GO ?= go
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# Version stamped into the binary (--version, cupti_exporter_build_info, OTLP service.version):
# git describe of the checkout; a plain `go build` falls back to the VCS stamp of the Go toolchain.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null | sed 's/^v//')
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
BRANCH   ?= $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null)
VERSION_PKG := github.com/prometheus/common/version
LDFLAGS := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Revision=$(REVISION) \
	-X $(VERSION_PKG).Branch=$(BRANCH) -X $(VERSION_PKG).BuildUser=$(shell id -un 2>/dev/null)@$(shell hostname 2>/dev/null) \
	-X $(VERSION_PKG).BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)

.PHONY: all build test demo docs chart-dashboards synthetic synthetic-node synthetic-training otelcol image clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o cupti-exporter ./cmd/cupti-exporter

test:
	bash .ci/run

demo:
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/cupti-exporter --demo

# Regenerate generated documentation (configuration and metrics references, the Supported GPUs tables).
docs:
	$(GO) test ./cmd/cupti-exporter -run TestConfigurationDoc -update
	$(GO) test ./e2e -run TestMetricsDoc -update
	$(GO) test ./pmsample/catalog -run TestSupportedGPUsDoc -update

# Copy dashboards/*.json into the Helm chart, which packages only files inside it
# (grafanaDashboards, docs/dashboards.md); go test ./helm fails while the copies differ.
chart-dashboards:
	$(GO) test ./helm -run TestChartDashboards -update-dashboards

# A synthetic two-GPU recording (the embedded demo is a real H200 run): replay it with
# `go run ./cmd/cupti-exporter replay synthetic.cuptirec --replay.loop`.
synthetic:
	$(GO) run ./recording/internal/gensynthetic -o synthetic.cuptirec

# The busy node of the sizing guide (docs/sizing.md): 8 GPUs, 30 traced pods, 5,000 kernel names.
synthetic-node:
	$(GO) run ./recording/internal/gensynthetic -o node.cuptirec -gpus 8 -pods 30 -kernel-names 5000

# Two training jobs of two ranks on four GPUs, one rank of "pretrain" 30 % slower (docs/training.md).
synthetic-training:
	$(GO) run ./recording/internal/gensynthetic -o training.cuptirec -training

# The OpenTelemetry Collector the e2e test pushes to (built once, cached; prints its path).
otelcol:
	bash scripts/ci/otelcol.sh

# The chart's image, with the version of this checkout.
image:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) --build-arg BRANCH=$(BRANCH) -t cupti-exporter:$(VERSION) .

clean:
	rm -f cupti-exporter
