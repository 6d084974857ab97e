{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "cupti-exporter.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name. */}}
{{- define "cupti-exporter.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "cupti-exporter.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "cupti-exporter.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cupti-exporter.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cupti-exporter.labels" -}}
helm.sh/chart: {{ include "cupti-exporter.chart" . }}
{{ include "cupti-exporter.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: exporter
{{- end }}

{{- define "cupti-exporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "cupti-exporter.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "cupti-exporter.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The activity socket path. */}}
{{- define "cupti-exporter.socket" -}}
{{- printf "%s/activity.sock" (trimSuffix "/" .Values.injection.hostDir) }}
{{- end }}

{{/* The injection library path as workloads see it. */}}
{{- define "cupti-exporter.injectionLibrary" -}}
{{- printf "%s/%s" (trimSuffix "/" .Values.injection.hostDir) (base .Values.injection.imagePath) }}
{{- end }}

{{/*
Init container copying the injection library into the shared folder. It writes a
temporary file and renames it, so processes that have the previous library mapped keep
a valid file (overwriting in place would corrupt their mapping).
*/}}
{{- define "cupti-exporter.copyLibraryContainer" -}}
{{- $sidecar := index . 1 }}
{{- with index . 0 }}
- name: copy-injection-library
  image: {{ include "cupti-exporter.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - /bin/sh
    - -c
    - >-
      cp {{ .Values.injection.imagePath }} {{ include "cupti-exporter.injectionLibrary" . }}.tmp &&
      chmod 0755 {{ include "cupti-exporter.injectionLibrary" . }}.tmp &&
      mv -f {{ include "cupti-exporter.injectionLibrary" . }}.tmp {{ include "cupti-exporter.injectionLibrary" . }}
  securityContext:
    privileged: false
    {{- if not $sidecar }}
    # The host folder belongs to root.
    runAsUser: 0
    {{- end }}
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  resources:
    {{- toYaml .Values.initResources | nindent 4 }}
  volumeMounts:
    - name: cupti-exporter-run
      mountPath: {{ .Values.injection.hostDir }}
{{- end }}
{{- end }}

{{/* Flags of `cupti-exporter serve`; $sidecar turns PM sampling and pod-resources off. */}}
{{- define "cupti-exporter.args" -}}
{{- $root := index . 0 }}
{{- $sidecar := index . 1 }}
{{- with $root -}}
- serve
- --web.listen-address=:{{ .Values.web.port }}
{{- if $sidecar }}
- --web.health-listen-address=
{{- else }}
- --web.health-listen-address=:{{ .Values.web.healthPort }}
{{- end }}
{{- if and .Values.web.configSecret (not $sidecar) }}
- --web.config.file=/etc/cupti-exporter/web/web-config.yml
{{- end }}
{{- if and .Values.web.enablePMSamplingAPI .Values.pmsample.enabled (not $sidecar) }}
- --web.enable-pm-sampling-api
{{- end }}
{{- if and .Values.pmsample.enabled (not $sidecar) }}
- --pmsample.enabled
- --pmsample.interval={{ .Values.pmsample.interval }}
{{- with .Values.pmsample.decodePeriod }}
- --pmsample.decode-period={{ . }}
{{- end }}
- --pmsample.window={{ .Values.pmsample.window }}
{{- with .Values.pmsample.metrics }}
- --pmsample.metrics={{ join "," . }}
{{- end }}
{{- with (.Values.pmsample.cupti.library | default .Values.pmsample.cupti.hostDir) }}
- --cupti.library={{ . }}
{{- end }}
{{- else }}
- --no-pmsample.enabled
{{- end }}
{{- if .Values.activity.enabled }}
- --activity.enabled
- --activity.socket={{ include "cupti-exporter.socket" . }}
- --activity.socket-mode={{ .Values.activity.socketMode }}
{{- with (include "cupti-exporter.memoryBudget" (list . $sidecar)) }}
- --activity.memory-budget={{ . }}
{{- end }}
{{- if $sidecar }}
{{- /* The socket is in the pod's own volume: only its containers reach it (docs/security.md). */}}
- --activity.trust-hello-pods
{{- end }}
{{- include "cupti-exporter.seriesBudgetArgs" . }}
{{- else }}
- --no-activity.enabled
{{- end }}
{{- $health := .Values.health | default dict }}
{{- if and (not $sidecar) (ne (toString $health.enabled) "false") }}
- --health.enabled
- --health.interval={{ $health.interval | default "1s" }}
{{- if ne (toString $health.gpm) "false" }}
- --health.gpm
{{- end }}
{{- else }}
- --no-health.enabled
{{- end }}
{{- /* Explicit, so that auto never starts an informer the RBAC does not allow. */}}
{{- if and (not $sidecar) (eq (include "cupti-exporter.podInformer" .) "true") }}
- --kubernetes.pod-informer=on
{{- else }}
- --kubernetes.pod-informer=off
{{- end }}
{{- if and .Values.kubelet.podResources.enabled (not $sidecar) }}
- --kubelet.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock
{{- end }}
{{- /* Node mode only: a sidecar has no PodResources socket, so its auto is off already. */}}
{{- if not $sidecar }}
- --kubernetes.resource-slices={{ if eq (include "cupti-exporter.resourceSlices" .) "true" }}on{{ else }}off{{ end }}
{{- end }}
{{- if and .Values.config (not $sidecar) }}
- --config.file=/etc/cupti-exporter/config/config.yml
{{- end }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Probes on the plain health listener (--web.health-listen-address): it serves /healthz and
/readyz without TLS or auth, so the probes work whatever web.configSecret requires. The
readiness probe asks /healthz, not /readyz: the exporter stays ready while the counters are
busy (another profiler) and serves everything else.
*/}}
{{- define "cupti-exporter.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: health
  periodSeconds: 20
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /healthz
    port: health
  periodSeconds: 10
{{- end }}

{{/* The scheme Prometheus scrapes with: https when web.configSecret turns TLS on. */}}
{{- define "cupti-exporter.scheme" -}}
{{- if and .Values.web.configSecret .Values.web.tls }}https{{ else }}http{{ end }}
{{- end }}

{{/*
Scrape options of a ServiceMonitor endpoint or PodMonitor podMetricsEndpoint, passed through
as prometheus-operator defines them: tlsConfig, basicAuth, authorization, relabelings (after
the chart's node label) and metricRelabelings. Argument: (list root monitorValues).
*/}}
{{- define "cupti-exporter.scrapeOptions" -}}
{{- $root := index . 0 }}
{{- $m := index . 1 }}
{{- with $m.tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.basicAuth }}
basicAuth:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $m.authorization }}
authorization:
  {{- toYaml . | nindent 2 }}
{{- end }}
relabelings:
  # The node is the useful identity of a DaemonSet exporter.
  - sourceLabels: [__meta_kubernetes_pod_node_name]
    targetLabel: node
  {{- with $m.relabelings }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- with $m.metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Whether the pod informer's RBAC and token are rendered (node mode only). */}}
{{- define "cupti-exporter.podInformer" -}}
{{- if and (eq .Values.mode "node") .Values.kubernetes.podInformer.enabled }}true{{ end }}
{{- end }}

{{/* "true" when the node exporter maps DRA-allocated GPUs through the ResourceSlices of its
node: it reads the kubelet PodResources API and kubernetes.resourceSlices is on. */}}
{{- define "cupti-exporter.resourceSlices" -}}
{{- if and (eq .Values.mode "node") .Values.kubelet.podResources.enabled (.Values.kubernetes.resourceSlices | default dict).enabled }}true{{ end }}
{{- end }}

{{/* "true" when the node exporter talks to the Kubernetes API (pod informer or ResourceSlice
informer): the ClusterRole and the service account token come with it. */}}
{{- define "cupti-exporter.kubeAPI" -}}
{{- if or (eq (include "cupti-exporter.podInformer" .) "true") (eq (include "cupti-exporter.resourceSlices" .) "true") }}true{{ end }}
{{- end }}

{{/* The selector of the exporter's up series in alerts. */}}
{{- define "cupti-exporter.upSelector" -}}
{{- if .Values.prometheusRule.upSelector }}
{{- .Values.prometheusRule.upSelector }}
{{- else if eq .Values.mode "sidecar" }}
{{- printf "job=\"%s/%s\"" .Release.Namespace (include "cupti-exporter.fullname" .) }}
{{- else if .Values.serviceMonitor.enabled }}
{{- printf "job=\"%s\"" (include "cupti-exporter.fullname" .) }}
{{- else }}
{{- printf "job=\"%s/%s\"" .Release.Namespace (include "cupti-exporter.fullname" .) }}
{{- end }}
{{- end }}

{{/* Name of cluster-scoped objects: unique per release and namespace. */}}
{{- define "cupti-exporter.clusterName" -}}
{{- printf "%s-%s" (include "cupti-exporter.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" }}
{{- end }}

{{/*
The activity receiver's memory budget (--activity.memory-budget), or nothing for the
binary's default (128MiB, node mode). The sidecar defaults to 64MiB: its limit is
256Mi, and the heap may reach about twice the budget (docs/activity.md).
Argument: (list root sidecar).
*/}}
{{- define "cupti-exporter.memoryBudget" -}}
{{- $root := index . 0 }}
{{- $budget := $root.Values.activity.memoryBudget | default "" | toString }}
{{- if and (not $budget) (index . 1) }}{{ $budget = "64MiB" }}{{ end }}
{{- with $budget }}
{{- $bytes := "" }}
{{- if regexMatch "^[0-9]+ *(B|KiB|MiB|GiB|KB|MB|GB)?$" . }}{{ $bytes = include "cupti-exporter.bytes" . }}{{ end }}
{{- if not $bytes }}
{{- fail (printf "activity.memoryBudget %q: want a whole number with a unit (B, KiB, MiB, GiB, KB, MB, GB), e.g. 128MiB" .) }}
{{- end }}
{{- if lt (float64 $bytes) 16777216.0 }}
{{- fail (printf "activity.memoryBudget %q: the exporter refuses less than 16MiB" .) }}
{{- end }}
{{- . }}
{{- end }}
{{- end }}

{{/*
Bytes (an integer, as text) of a size: a Kubernetes quantity (1Gi, 512Mi, 1G, 1073741824)
or a size as the exporter's flags write it (128MiB, 1GB). Empty when it cannot be read.
*/}}
{{- define "cupti-exporter.bytes" -}}
{{- if or (kindIs "float64" .) (kindIs "int" .) (kindIs "int64" .) }}
{{- printf "%.0f" (float64 .) }}
{{- else }}
{{- $s := toString . | trim }}
{{- if regexMatch "^([0-9]+(\\.[0-9]+)?) *(B|Ki|Mi|Gi|Ti|Pi|Ei|KiB|MiB|GiB|TiB|k|K|M|G|T|P|E|KB|MB|GB|TB)?$" $s }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $s }}
{{- $unit := trimPrefix $num $s | trim }}
{{- $units := dict "" 1.0 "B" 1.0 "k" 1e3 "K" 1e3 "KB" 1e3 "M" 1e6 "MB" 1e6 "G" 1e9 "GB" 1e9 "T" 1e12 "TB" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "KiB" 1024.0 "Mi" 1048576.0 "MiB" 1048576.0 "Gi" 1073741824.0 "GiB" 1073741824.0 "Ti" 1099511627776.0 "TiB" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 }}
{{- printf "%.0f" (mulf (float64 $num) (get $units $unit)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
GOMEMLIMIT at 90 % of the container's memory limit, when it has one and extraEnv does not
set GOMEMLIMIT itself: the Go garbage collector then works harder near the limit instead of
letting the heap grow into an OOM kill. It bounds only the Go runtime's memory, not CUPTI's
C allocations (PM sampling). Argument: (list root resources).
*/}}
{{- define "cupti-exporter.goMemLimitEnv" -}}
{{- $root := index . 0 }}
{{- $limit := "" }}
{{- with index . 1 }}{{ with .limits }}{{ with .memory }}{{ $limit = . }}{{ end }}{{ end }}{{ end }}
{{- $given := false }}
{{- range $root.Values.extraEnv }}{{ if eq .name "GOMEMLIMIT" }}{{ $given = true }}{{ end }}{{ end }}
{{- if and $limit (not $given) }}
{{- $bytes := include "cupti-exporter.bytes" $limit }}
{{- if not $bytes }}
{{- fail (printf "memory limit %v: cannot compute GOMEMLIMIT from it; write it as a Kubernetes quantity such as 1Gi, or set GOMEMLIMIT in extraEnv" $limit) }}
{{- end }}
{{- $mem := mulf (float64 $bytes) 0.9 }}
- name: GOMEMLIMIT
  {{- if ge $mem 1048576.0 }}
  value: {{ printf "%.0fMiB" (floor (divf $mem 1048576.0)) | quote }}
  {{- else }}
  value: {{ printf "%.0f" (floor $mem) | quote }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The series budget's flags (values seriesBudget; docs/sizing.md): only the keys that are set.
*/}}
{{- define "cupti-exporter.seriesBudgetArgs" -}}
{{- $b := .Values.seriesBudget | default dict }}
{{- if not (kindIs "invalid" $b.podHistograms) }}
- --{{ if not $b.podHistograms }}no-{{ end }}activity.pod-histograms
{{- end }}
{{- range $key, $flag := dict "topKernels" "activity.top-kernels" "attributionTopKernels" "attribution.top-kernels" }}
{{- $v := index $b $key }}
{{- if not (kindIs "invalid" $v) }}
- --{{ $flag }}={{ $v }}
{{- end }}
{{- end }}
{{- range $key, $flag := dict "kernelHistogramSplit" "activity.kernel-histogram-split" "copyHistogramSplit" "activity.copy-histogram-split" "histogramBuckets" "activity.histogram-buckets" "attributionKernelFamilies" "attribution.kernel-families" "attributionPodFamilies" "attribution.pod-families" }}
{{- $v := index $b $key }}
{{- if not (kindIs "invalid" $v) }}
- --{{ $flag }}={{ join "," $v }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Node mode: what a workload's GPU container and pod need to load the injection library from
the DaemonSet's host folder (the hand edits of docs/kubernetes.md, NOTES.txt and the
webhook's node wiring). POD_NAME, POD_NAMESPACE and CONTAINER_NAME name the pod where its
cgroup cannot (private cgroup namespaces); CONTAINER_NAME is the container's own name.
*/}}
{{- define "cupti-exporter.node.workloadEnv" -}}
- name: CUDA_INJECTION64_PATH
  value: {{ include "cupti-exporter.injectionLibrary" . }}
- name: CUPTI_EXPORTER_SOCKET
  value: {{ include "cupti-exporter.socket" . }}
{{- end }}

{{- define "cupti-exporter.node.workloadVolumeMounts" -}}
- name: cupti-exporter
  mountPath: {{ .Values.injection.hostDir }}
  readOnly: true
{{- end }}

{{/* DirectoryOrCreate: a pod scheduled before the DaemonSet ran on its node still starts. */}}
{{- define "cupti-exporter.node.volumes" -}}
- name: cupti-exporter
  hostPath:
    path: {{ .Values.injection.hostDir }}
    type: DirectoryOrCreate
{{- end }}

{{/* Names of the admission webhook's objects. */}}
{{- define "cupti-exporter.webhook.name" -}}
{{- printf "%s-webhook" (include "cupti-exporter.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{- define "cupti-exporter.webhook.selectorLabels" -}}
{{ include "cupti-exporter.selectorLabels" . }}
app.kubernetes.io/component: webhook
{{- end }}

{{- define "cupti-exporter.webhook.labels" -}}
helm.sh/chart: {{ include "cupti-exporter.chart" . }}
{{ include "cupti-exporter.webhook.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "cupti-exporter.webhook.serviceAccountName" -}}
{{- include "cupti-exporter.webhook.name" . }}
{{- end }}

{{/* The webhook's DNS name, covered by its serving certificate. */}}
{{- define "cupti-exporter.webhook.dnsName" -}}
{{- printf "%s.%s.svc" (include "cupti-exporter.webhook.name" .) .Release.Namespace }}
{{- end }}

{{/* The MutatingWebhookConfiguration (cluster-scoped: unique per release and namespace). */}}
{{- define "cupti-exporter.webhook.configurationName" -}}
{{- printf "%s-webhook" (include "cupti-exporter.clusterName" . | trunc 245 | trimSuffix "-") }}
{{- end }}
