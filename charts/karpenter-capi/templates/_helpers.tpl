{{/*
The chart's name.
*/}}
{{- define "karpenter-capi.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fullname: the release name when it already contains the chart's name.
*/}}
{{- define "karpenter-capi.fullname" -}}
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

{{/*
Chart name and version, for the helm.sh/chart label.
*/}}
{{- define "karpenter-capi.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "karpenter-capi.labels" -}}
helm.sh/chart: {{ include "karpenter-capi.chart" . }}
{{ include "karpenter-capi.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
Selector labels.
*/}}
{{- define "karpenter-capi.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter-capi.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The annotations block of every object (nothing when there are none).
*/}}
{{- define "karpenter-capi.annotations" -}}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The ServiceAccount's name.
*/}}
{{- define "karpenter-capi.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "karpenter-capi.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The controller image: repository, then the digest if given, else the tag (default appVersion).
*/}}
{{- define "karpenter-capi.controller.image" -}}
{{- if .Values.controller.image.digest }}
{{- printf "%s@%s" .Values.controller.image.repository .Values.controller.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.controller.image.repository (default .Chart.AppVersion .Values.controller.image.tag) }}
{{- end }}
{{- end }}

{{/*
Whether the Cluster API objects live in this cluster (no management kubeconfig given): then the
management rules are bound to the controller's ServiceAccount here as well.
*/}}
{{- define "karpenter-capi.joined" -}}
{{- if not .Values.clusterAPI.kubeconfigSecret.name }}true{{ end }}
{{- end }}

{{/*
Where the management kubeconfig is mounted, and the file the controller reads.
*/}}
{{- define "karpenter-capi.kubeconfigDir" -}}
/etc/karpenter-capi/management
{{- end }}
{{- define "karpenter-capi.kubeconfigPath" -}}
{{ include "karpenter-capi.kubeconfigDir" . }}/kubeconfig
{{- end }}
