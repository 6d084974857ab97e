{{/*
The webhook's wiring file (webhook.Config in the webhook package): node wiring from the hand
edits of node mode, sidecar wiring from the sidecar-mode templates. The webhook adds POD_NAME,
POD_NAMESPACE and CONTAINER_NAME to both itself (CONTAINER_NAME differs per container).
*/}}
{{- define "cupti-exporter.webhook.wiring" -}}
node:
  env:
    {{- include "cupti-exporter.node.workloadEnv" . | nindent 4 }}
  volumeMounts:
    {{- include "cupti-exporter.node.workloadVolumeMounts" . | nindent 4 }}
  volumes:
    {{- include "cupti-exporter.node.volumes" . | nindent 4 }}
sidecar:
  initContainers:
    {{- include "cupti-exporter.sidecar.render" . | trim | nindent 4 }}
  env:
    {{- include "cupti-exporter.sidecar.workloadEnv.render" . | nindent 4 }}
  volumeMounts:
    {{- include "cupti-exporter.sidecar.workloadVolumeMounts.render" . | nindent 4 }}
  volumes:
    {{- include "cupti-exporter.sidecar.volumes.render" . | nindent 4 }}
  {{- with .Values.podMonitor.selector.matchLabels }}
  # Selected by the PodMonitor of sidecars (podMonitor.selector).
  podLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}

{{/* Flags of `cupti-exporter webhook`. */}}
{{- define "cupti-exporter.webhook.args" -}}
{{- $wh := .Values.webhook -}}
- webhook
- --webhook.listen-address=:{{ $wh.port }}
- --webhook.health-listen-address=:{{ $wh.healthPort }}
- --webhook.wiring-file=/etc/cupti-exporter/webhook/wiring.yaml
- --webhook.gpu-resources={{ join "," $wh.gpuResources }}
{{- with $wh.excludeNamespaces }}
- --webhook.exclude-namespaces={{ join "," . }}
{{- end }}
- --webhook.own-label=app.kubernetes.io/name={{ include "cupti-exporter.name" . }}
- --webhook.default-pod-security={{ $wh.defaultPodSecurity }}
- --webhook.sidecar-user={{ $wh.sidecarUser }}
{{- if ne .Values.mode "node" }}
- --no-webhook.node-wiring
{{- end }}
{{- if $wh.certManager.enabled }}
- --webhook.tls.cert-file=/etc/cupti-exporter/webhook-tls/tls.crt
- --webhook.tls.key-file=/etc/cupti-exporter/webhook-tls/tls.key
{{- else }}
- --webhook.tls.secret={{ include "cupti-exporter.webhook.name" . }}-tls
- --webhook.tls.dns-names={{ include "cupti-exporter.webhook.dnsName" . }}
- --webhook.configuration={{ include "cupti-exporter.webhook.configurationName" . }}
{{- end }}
{{- with $wh.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}
