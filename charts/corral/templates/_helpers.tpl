{{/* The release's base name, at most 63 characters (a DNS label). */}}
{{- define "corral.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "corral.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The headless Service that members gossip through; <= 63 characters with its suffix. */}}
{{- define "corral.headless" -}}
{{- printf "%s-headless" (include "corral.fullname" . | trunc 54 | trimSuffix "-") -}}
{{- end -}}

{{- define "corral.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "corral.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: cache
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "corral.selectorLabels" -}}
app.kubernetes.io/name: {{ include "corral.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of the corral pods: the chart's own in server mode, the application's in library mode. */}}
{{- define "corral.podSelector" -}}
{{- if eq .Values.mode "library" -}}
{{- if not .Values.library.selector -}}
{{- fail "library mode needs library.selector: the labels of your application's pods" -}}
{{- end -}}
{{- toYaml .Values.library.selector -}}
{{- else -}}
{{- include "corral.selectorLabels" . -}}
{{- end -}}
{{- end -}}

{{- define "corral.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "corral.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "corral.gossipSecretName" -}}
{{- default (printf "%s-gossip" (include "corral.fullname" .)) .Values.gossip.existingSecret -}}
{{- end -}}

{{- define "corral.gossipSecretKey" -}}
{{- if .Values.gossip.existingSecret -}}{{ .Values.gossip.existingSecretKey }}{{- else -}}key{{- end -}}
{{- end -}}

{{- define "corral.clusterLabel" -}}
{{- default (printf "%s.%s" .Release.Name .Release.Namespace) .Values.gossip.label -}}
{{- end -}}

{{/* The seed every member joins. */}}
{{- define "corral.join" -}}
{{- if eq .Values.discovery.mode "k8s" -}}
k8s://{{ .Release.Namespace }}/{{ include "corral.headless" . }}
{{- else -}}
dns+{{ include "corral.headless" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}:{{ .Values.ports.gossip }}
{{- end -}}
{{- end -}}

{{/* The PromQL label matchers of this release's scraped pods (the ServiceMonitor's job is the headless Service). */}}
{{- define "corral.promSelector" -}}
job="{{ include "corral.headless" . }}", namespace="{{ .Release.Namespace }}"
{{- end -}}

{{- define "corral.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The kubelet's grace before SIGKILL: above corral serve's whole graceful stop. */}}
{{- define "corral.terminationGrace" -}}
{{- $s := .Values.server -}}
{{- if lt (int $s.shutdownTimeoutSeconds) (add $s.shutdownDelaySeconds $s.drainSeconds 5 | int) -}}
{{- fail (printf "server.shutdownTimeoutSeconds (%v) must be at least shutdownDelaySeconds + drainSeconds + 5 (%v): leaving and handing keys off need the 5" $s.shutdownTimeoutSeconds (add $s.shutdownDelaySeconds $s.drainSeconds 5)) -}}
{{- end -}}
{{- if $s.terminationGracePeriodSeconds -}}
{{- if le (int $s.terminationGracePeriodSeconds) (int $s.shutdownTimeoutSeconds) -}}
{{- fail "server.terminationGracePeriodSeconds must be above server.shutdownTimeoutSeconds" -}}
{{- end -}}
{{- $s.terminationGracePeriodSeconds -}}
{{- else -}}
{{- add $s.shutdownTimeoutSeconds 10 -}}
{{- end -}}
{{- end -}}

{{/* Fails on security values that cannot work together; prints nothing. */}}
{{- define "corral.checkSecurity" -}}
{{- $g := .Values.gossip -}}
{{- if and (not $g.encryption) (or (not $g.verifyIncoming) (not $g.verifyOutgoing)) -}}
{{- fail "gossip.verifyIncoming and gossip.verifyOutgoing need gossip.encryption: without a key gossip is plaintext anyway" -}}
{{- end -}}
{{- if and $g.verifyIncoming (not $g.verifyOutgoing) -}}
{{- fail "gossip.verifyOutgoing false needs gossip.verifyIncoming false: pods that send plaintext and refuse it would not hear each other" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) -}}
{{- fail "tls.enabled needs tls.existingSecret: the Secret with tls.crt, tls.key and ca.crt (cert-manager's)" -}}
{{- end -}}
{{- end -}}

{{- define "corral.apiTokenSecretName" -}}
{{- default (printf "%s-api-token" (include "corral.fullname" .)) .Values.apiToken.existingSecret -}}
{{- end -}}

{{- define "corral.apiTokenSecretKey" -}}
{{- if .Values.apiToken.existingSecret -}}{{ .Values.apiToken.existingSecretKey }}{{- else -}}token{{- end -}}
{{- end -}}
