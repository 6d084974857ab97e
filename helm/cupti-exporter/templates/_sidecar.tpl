{{/*
Sidecar mode. Include these in a workload's pod spec (see examples/sidecar.yaml):

  spec:
    initContainers:
      {{- include "cupti-exporter.sidecar" . | nindent 6 }}
    containers:
      - name: app
        env:
          {{- include "cupti-exporter.sidecar.workloadEnv" . | nindent 10 }}
        volumeMounts:
          {{- include "cupti-exporter.sidecar.workloadVolumeMounts" . | nindent 10 }}
    volumes:
      {{- include "cupti-exporter.sidecar.volumes" . | nindent 6 }}

"cupti-exporter.sidecar" renders two init containers: one copies the injection library
into the shared emptyDir, the other is the exporter itself as a native sidecar
(restartPolicy: Always, Kubernetes 1.29 or later), started and healthy before the
workload's containers and stopped after them, so the activity socket is listening
before the workload's first CUDA call and Jobs still complete. The sidecar only
receives activity records: PM sampling is device-wide and belongs to one node exporter.

"." may be this chart's context or, from a chart that depends on this one, the parent's:
the templates then render with this dependency's values and appVersion (found in
.Subcharts, by chart name or home, so an alias works too). Where no such context exists
(a parent that copied these templates, Helm before 3.10), they use the parent's values
under "cupti-exporter" over built-in defaults equal to values.yaml (a test keeps them so).
*/}}
{{- define "cupti-exporter.sidecar" -}}
{{- $r := dict }}
{{- $_ := include "cupti-exporter.sidecarContext" (list . $r) }}
{{- include "cupti-exporter.sidecar.render" $r.ctx }}
{{- end }}

{{/*
Environment of the workload container: load the injection library; POD_NAME and
POD_NAMESPACE from the downward API. Add CONTAINER_NAME (the container's name) beside it
to label the container too.
*/}}
{{- define "cupti-exporter.sidecar.workloadEnv" -}}
{{- $r := dict }}
{{- $_ := include "cupti-exporter.sidecarContext" (list . $r) }}
{{- include "cupti-exporter.sidecar.workloadEnv.render" $r.ctx }}
{{- end }}

{{/* Mount of the shared folder in the workload container. */}}
{{- define "cupti-exporter.sidecar.workloadVolumeMounts" -}}
{{- $r := dict }}
{{- $_ := include "cupti-exporter.sidecarContext" (list . $r) }}
{{- include "cupti-exporter.sidecar.workloadVolumeMounts.render" $r.ctx }}
{{- end }}

{{/* The shared folder: library and socket. */}}
{{- define "cupti-exporter.sidecar.volumes" -}}
{{- $r := dict }}
{{- $_ := include "cupti-exporter.sidecarContext" (list . $r) }}
{{- include "cupti-exporter.sidecar.volumes.render" $r.ctx }}
{{- end }}

{{/*
Sets (index . 1).ctx to the context the sidecar templates render with, given the caller's
context (index . 0): this chart's own context; else this chart's context among the
caller's .Subcharts; else a context made of the caller's values under "cupti-exporter"
over "cupti-exporter.defaultValues".
*/}}
{{- define "cupti-exporter.sidecarContext" -}}
{{- $root := index . 0 }}
{{- $out := index . 1 }}
{{- if and (include "cupti-exporter.isThisChart" $root.Chart) (kindIs "map" $root.Values.injection) }}
{{- $_ := set $out "ctx" $root }}
{{- else }}
{{- range $name, $sub := ($root.Subcharts | default dict) }}
{{- if and (not (hasKey $out "ctx")) (include "cupti-exporter.isThisChart" $sub.Chart) }}
{{- $_ := set $out "ctx" $sub }}
{{- end }}
{{- end }}
{{- end }}
{{- if not (hasKey $out "ctx") }}
{{- $given := dict }}
{{- if kindIs "map" (index ($root.Values | default dict) "cupti-exporter") }}
{{- $given = index $root.Values "cupti-exporter" }}
{{- end }}
{{- $defaults := include "cupti-exporter.defaultValues" . | fromYaml }}
{{- $values := mergeOverwrite $defaults (deepCopy $given) }}
{{- $_ := set $out "ctx" (dict "Values" $values "Chart" (dict "Name" "cupti-exporter" "AppVersion" $defaults.appVersion) "Release" $root.Release) }}
{{- end }}
{{- end }}

{{/* "true" when the chart metadata given is this chart's (its name, or its home under an alias). */}}
{{- define "cupti-exporter.isThisChart" -}}
{{- if or (eq .Name "cupti-exporter") (eq (.Home | default "") "https://github.com/cupti-exporter/cupti-exporter") }}true{{ end }}
{{- end }}

{{/*
The values the sidecar templates read, as in values.yaml, plus the chart's appVersion:
used only where this chart's own context cannot be found. A test keeps them equal to
values.yaml and Chart.yaml.
*/}}
{{- define "cupti-exporter.defaultValues" -}}
appVersion: "0.1.0"
image:
  repository: ghcr.io/cupti-exporter/cupti-exporter
  tag: ""
  digest: ""
  pullPolicy: IfNotPresent
injection:
  imagePath: /usr/lib/cupti-exporter/libcupti_exporter_inject.so
  hostDir: /run/cupti-exporter
  kinds: kernel,memcpy,memset
web:
  port: 9477
  healthPort: 9478
  configSecret: ""
  tls: true
  enablePMSamplingAPI: false
pmsample:
  enabled: true
activity:
  enabled: true
  socketMode: "0666"
  memoryBudget: ""
kubelet:
  podResources:
    enabled: true
config: {}
extraArgs: []
extraEnv: []
sidecarResources:
  requests:
    cpu: 50m
    memory: 64Mi
  limits:
    memory: 256Mi
initResources:
  requests:
    cpu: 10m
    memory: 16Mi
  limits:
    memory: 64Mi
{{- end }}
{{- define "cupti-exporter.sidecar.render" -}}
{{ include "cupti-exporter.copyLibraryContainer" (list . true) }}
- name: cupti-exporter
  image: {{ include "cupti-exporter.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  restartPolicy: Always
  args:
    {{- include "cupti-exporter.args" (list . true) | nindent 4 }}
  env:
    - name: POD_NAME
      valueFrom:
        fieldRef:
          fieldPath: metadata.name
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- include "cupti-exporter.goMemLimitEnv" (list . .Values.sidecarResources) | nindent 4 }}
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: cupti-metrics
      containerPort: {{ .Values.web.port }}
      protocol: TCP
  startupProbe:
    httpGet:
      path: /healthz
      port: cupti-metrics
    periodSeconds: 1
    failureThreshold: 30
  livenessProbe:
    httpGet:
      path: /healthz
      port: cupti-metrics
    periodSeconds: 20
  securityContext:
    privileged: false
    allowPrivilegeEscalation: false
    readOnlyRootFilesystem: true
    capabilities:
      drop: ["ALL"]
    seccompProfile:
      type: RuntimeDefault
  resources:
    {{- toYaml .Values.sidecarResources | nindent 4 }}
  volumeMounts:
    - name: cupti-exporter-run
      mountPath: {{ .Values.injection.hostDir }}
{{- end }}

{{/*
Environment of the workload container: load the injection library, and name the pod
(downward API) in the library's hello, so the sidecar labels the workload's series
without a pod informer. CONTAINER_NAME has no downward-API field: the caller may add it.
*/}}
{{- define "cupti-exporter.sidecar.workloadEnv.render" -}}
- name: CUDA_INJECTION64_PATH
  value: {{ include "cupti-exporter.injectionLibrary" . }}
- name: CUPTI_EXPORTER_SOCKET
  value: {{ include "cupti-exporter.socket" . }}
- name: CUPTI_EXPORTER_KINDS
  value: {{ .Values.injection.kinds | quote }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}

{{/* Mount of the shared folder in the workload container. */}}
{{- define "cupti-exporter.sidecar.workloadVolumeMounts.render" -}}
- name: cupti-exporter-run
  mountPath: {{ .Values.injection.hostDir }}
  readOnly: true
{{- end }}

{{/* The shared folder: library and socket. */}}
{{- define "cupti-exporter.sidecar.volumes.render" -}}
- name: cupti-exporter-run
  emptyDir:
    sizeLimit: 64Mi
{{- end }}
