# Image for the Helm chart: the exporter and the injection library it copies to the host.
# CUDA/CUPTI are not in the image: the exporter finds libcupti on the host or in a mounted
# toolkit (see --cupti.library), and the NVIDIA container runtime provides libcuda.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -o /out/cupti-exporter ./cmd/cupti-exporter \
 && make -C activity/inject \
 && cp activity/inject/build/libcupti_exporter_inject.so /out/

FROM debian:bookworm-slim
COPY --from=build /out/cupti-exporter /usr/bin/cupti-exporter
COPY --from=build /out/libcupti_exporter_inject.so /usr/lib/cupti-exporter/libcupti_exporter_inject.so
EXPOSE 9477
ENTRYPOINT ["/usr/bin/cupti-exporter"]
