{{/* Names and labels shared by every template. */}}

{{- define "epo.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release name when it already contains the chart name, as `helm create` does. */}}
{{- define "epo.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "epo.selectorLabels" -}}
app.kubernetes.io/name: {{ include "epo.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* No chart version or managed-by here: deploy/rbac.yaml is rendered from these templates. */}}
{{- define "epo.labels" -}}
{{ include "epo.selectorLabels" . }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "epo.subject" -}}
- kind: ServiceAccount
  name: {{ include "epo.fullname" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{- define "epo.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The image of probe Jobs: verification.probeImage, else the operator's own. */}}
{{- define "epo.probeImage" -}}
{{- .Values.verification.probeImage | default (include "epo.image" .) }}
{{- end }}

{{/* The operator's command line. */}}
{{- define "epo.args" -}}
- run
{{- if .Values.leaderElection.enabled }}
- --leader-elect
- {{ printf "--lease-name=%s" (include "epo.fullname" .) | quote }}
{{- end }}
- {{ printf "--admin-addr=0.0.0.0:%v" .Values.admin.port | quote }}
- {{ printf "--metrics-auth=%s" .Values.metrics.auth | quote }}
- {{ printf "--probe-image=%s" (include "epo.probeImage" .) | quote }}
{{- if .Values.trustRoots.configMap }}
- {{ printf "--trust-roots=/etc/egress-proxy-operator/trust-roots/%s" .Values.trustRoots.key | quote }}
{{- end }}
{{- if .Values.watchNamespaces }}
{{- range .Values.watchNamespaces }}
- {{ printf "--namespace=%s" . | quote }}
{{- end }}
{{- else }}
- {{ printf "--namespace-selector=%s" .Values.namespaceSelector | quote }}
{{- end }}
{{- with .Values.clusterDomain }}
- {{ printf "--cluster-domain=%s" . | quote }}
{{- end }}
{{- range .Values.serviceCIDRs }}
- {{ printf "--service-cidr=%s" . | quote }}
{{- end }}
{{- range .Values.podCIDRs }}
- {{ printf "--pod-cidr=%s" . | quote }}
{{- end }}
{{- $flags := dict "openshift" "openshift" "ovnKubernetes" "ovn-kubernetes" "calico" "calico" "cilium" "cilium" "k3s" "k3s" "kubeApiserver" "kube-apiserver" "kubeDns" "kube-dns" }}
{{- range $key, $flag := $flags }}
{{- if not (index $.Values.discoverySources $key) }}
- {{ printf "--disable-discovery-source=%s" $flag | quote }}
{{- end }}
{{- end }}
{{- with .Values.logLevel }}
- {{ printf "--log-level=%s" . | quote }}
{{- end }}
- {{ printf "--log-format=%s" .Values.logFormat | quote }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
