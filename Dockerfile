# Image for the Helm chart: the exporter, the injection library it copies to the host, and
# CUPTI 13 with nvperf (NVIDIA's cuda-cupti package; the exporter finds it under /usr/local/cuda).
# The NVIDIA container toolkit provides libcuda.so.1 at run time. To use the node's own CUPTI
# instead, set the chart's pmsample.cupti.hostDir.
FROM golang:1.26-bookworm AS build
# The version stamped into the binary: `make image` passes git describe. Without it the
# binary takes the VCS revision Go records when .git is in the build context.
ARG VERSION=""
ARG REVISION=""
ARG BRANCH=""
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN v=github.com/prometheus/common/version \
 && go build -trimpath -ldflags "-X $v.Version=${VERSION} -X $v.Revision=${REVISION} -X $v.Branch=${BRANCH} -X $v.BuildUser=docker -X $v.BuildDate=$(date -u +%Y%m%d-%H:%M:%S)" \
      -o /out/cupti-exporter ./cmd/cupti-exporter \
 && make -C activity/inject \
 && cp activity/inject/build/libcupti_exporter_inject.so /out/

FROM nvidia/cuda:13.0.1-base-ubuntu24.04
RUN apt-get update \
 && apt-get install -y --no-install-recommends cuda-cupti-13-0 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/cupti-exporter /usr/bin/cupti-exporter
COPY --from=build /out/libcupti_exporter_inject.so /usr/lib/cupti-exporter/libcupti_exporter_inject.so
EXPOSE 9477
ENTRYPOINT ["/usr/bin/cupti-exporter"]
