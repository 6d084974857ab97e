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
*/}}
{{- define "cupti-exporter.sidecar" -}}
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

{{/* Environment of the workload container: load the injection library. */}}
{{- define "cupti-exporter.sidecar.workloadEnv" -}}
- name: CUDA_INJECTION64_PATH
  value: {{ include "cupti-exporter.injectionLibrary" . }}
- name: CUPTI_EXPORTER_SOCKET
  value: {{ include "cupti-exporter.socket" . }}
- name: CUPTI_EXPORTER_KINDS
  value: {{ .Values.injection.kinds | quote }}
{{- end }}

{{/* Mount of the shared folder in the workload container. */}}
{{- define "cupti-exporter.sidecar.workloadVolumeMounts" -}}
- name: cupti-exporter-run
  mountPath: {{ .Values.injection.hostDir }}
  readOnly: true
{{- end }}

{{/* The shared folder: library and socket. */}}
{{- define "cupti-exporter.sidecar.volumes" -}}
- name: cupti-exporter-run
  emptyDir:
    sizeLimit: 64Mi
{{- end }}
