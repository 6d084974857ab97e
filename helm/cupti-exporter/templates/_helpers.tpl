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
{{- if and .Values.web.configSecret (not $sidecar) }}
- --web.config.file=/etc/cupti-exporter/web/web-config.yml
{{- end }}
{{- if and .Values.pmsample.enabled (not $sidecar) }}
- --pmsample.enabled
- --pmsample.interval={{ .Values.pmsample.interval }}
- --pmsample.decode-period={{ .Values.pmsample.decodePeriod }}
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
{{- else }}
- --no-activity.enabled
{{- end }}
{{- if and .Values.kubelet.podResources.enabled (not $sidecar) }}
- --kubelet.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock
{{- end }}
{{- if and .Values.config (not $sidecar) }}
- --config.file=/etc/cupti-exporter/config/config.yml
{{- end }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Probes on the exporter's /healthz (ready also while counters are busy). */}}
{{- define "cupti-exporter.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: metrics
    {{- if .Values.web.configSecret }}
    scheme: HTTPS
    {{- end }}
  periodSeconds: 20
  failureThreshold: 3
readinessProbe:
  httpGet:
    path: /healthz
    port: metrics
    {{- if .Values.web.configSecret }}
    scheme: HTTPS
    {{- end }}
  periodSeconds: 10
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
