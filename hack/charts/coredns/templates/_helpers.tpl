{{/* cluster is a fact of the cluster the BPA sets (global.edgefleet.cluster.<name>); rendering fails without it. */}}
{{- define "coredns.cluster" -}}
{{- $name := index . 0 -}}
{{- $global := (index . 1).Values.global | default dict -}}
{{- required (printf "global.edgefleet.cluster.%s is not set: the BPA sets the cluster's facts (docs/bpa.md, Charts)" $name) (dig "edgefleet" "cluster" $name "" $global) -}}
{{- end -}}

{{- define "coredns.selectorLabels" -}}
k8s-app: kube-dns
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "coredns.labels" -}}
{{ include "coredns.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
