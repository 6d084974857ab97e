{{/*
Labels of one alert: its severity and prometheusRule.alertLabels. The severity is, first
found: prometheusRule.severities.<alert>, alertLabels.severity (one severity for every
alert, as before severities by impact), then the alert's own by impact (docs/runbook.md).
Argument: (list root alertName defaultSeverity).
*/}}
{{- define "cupti-exporter.alertLabels" -}}
{{- $r := (index . 0).Values.prometheusRule }}
{{- $name := index . 1 }}
{{- $sev := index . 2 }}
{{- if hasKey $r.alertLabels "severity" }}{{ $sev = $r.alertLabels.severity }}{{ end }}
{{- if hasKey $r.severities $name }}{{ $sev = index $r.severities $name }}{{ end }}
{{- toYaml (merge (dict "severity" $sev) $r.alertLabels) }}
{{- end }}

{{/*
The runbook_url annotation of one alert: its section of docs/runbook.md, whose anchor is
the alert's name in lower case (GitHub's heading anchors). Argument: (list root alertName).
*/}}
{{- define "cupti-exporter.runbookURL" -}}
{{- printf "%s#%s" (index . 0).Values.prometheusRule.runbookBaseURL (lower (index . 1)) | quote }}
{{- end }}
