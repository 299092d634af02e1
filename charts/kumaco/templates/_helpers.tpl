{{/* The name of most objects: the release name (kumaco for `helm install kumaco`). */}}
{{- define "kumaco.fullname" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kumaco.labels" -}}
app.kubernetes.io/name: kumaco
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "kumaco.selectorLabels" -}}
app.kubernetes.io/name: kumaco
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kumaco.serviceAccountName" -}}
{{- default (include "kumaco.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "kumaco.leaseName" -}}
{{- default (include "kumaco.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The watched namespaces, one per line: watchNamespaces, else the release namespace. */}}
{{- define "kumaco.watchNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- join "\n" .Values.watchNamespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The port of an ADDR such as 0.0.0.0:8080 or [::]:8080. */}}
{{- define "kumaco.port" -}}
{{- splitList ":" . | last | int -}}
{{- end -}}
