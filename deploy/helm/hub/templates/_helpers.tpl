{{/* A name of at most 63 characters (a DNS label, a label value): as is when
     it fits, else its first 52 characters and 10 of its hash, so that two long
     names never truncate to the same one. */}}
{{- define "hub.dnsName" -}}
{{- if le (len .) 63 -}}
{{- . -}}
{{- else -}}
{{- printf "%s-%s" (. | trunc 52 | trimSuffix "-") (. | sha256sum | trunc 10) -}}
{{- end -}}
{{- end -}}

{{/* <prefix>-<suffix> in at most 63 characters: past that the prefix (the
     release name) is cut and 6 characters of the full name's hash follow it,
     so the suffix (what the object is) stays readable and names stay unique. */}}
{{- define "hub.joinName" -}}
{{- $full := printf "%s-%s" .prefix .suffix -}}
{{- $keep := sub 63 (add (len .suffix) 8) | int -}}
{{- if le (len $full) 63 -}}
{{- $full -}}
{{- else if lt $keep 1 -}}
{{- include "hub.dnsName" $full -}}
{{- else -}}
{{- printf "%s-%s-%s" (.prefix | trunc $keep | trimSuffix "-") ($full | sha256sum | trunc 6) .suffix -}}
{{- end -}}
{{- end -}}

{{- define "hub.fullname" -}}
{{- include "hub.joinName" (dict "prefix" .root.Release.Name "suffix" .name) -}}
{{- end -}}

{{/* The Service of a service, for URLs in values: (list $ "identity"). */}}
{{- define "hub.host" -}}
{{- include "hub.fullname" (dict "root" (index . 0) "name" (index . 1)) -}}
{{- end -}}

{{/* A migration Job: <release>-<service>-migrate-<revision>, at most 63
     characters (its pods' job-name label must fit). */}}
{{- define "hub.jobName" -}}
{{- include "hub.joinName" (dict "prefix" .root.Release.Name "suffix" (printf "%s-migrate-%d" .name (int .root.Release.Revision))) -}}
{{- end -}}

{{/* The image: by digest when image.digest is set, else by tag (default: the
     chart's appVersion). */}}
{{- define "hub.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* A value of services.*.env as the string an env var holds: any scalar
     (whole numbers without an exponent: YAML numbers reach the chart as
     floats), "{{ .Release.Name }}" expanded. */}}
{{- define "hub.envValue" -}}
{{- $v := .value -}}
{{- if kindIs "invalid" $v -}}
{{- "" -}}
{{- else if and (kindIs "float64" $v) (eq $v (floor $v)) -}}
{{- $v | int64 | toString -}}
{{- else -}}
{{- tpl (toString $v) .root -}}
{{- end -}}
{{- end -}}

{{/* Pod-level settings shared by the Deployments and the migration Jobs:
     no API token, pull secrets, the pod security context and scheduling. */}}
{{- define "hub.podSpec" -}}
automountServiceAccountToken: false
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with (.svc.nodeSelector | default .root.Values.nodeSelector) }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.svc.tolerations | default .root.Values.tolerations) }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with (.svc.affinity | default .root.Values.affinity) }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Pod annotations: podAnnotations, and checksums of what the chart renders
     into the pods' environment and files (the dev Secret, the extra CA), so
     the pods roll when those change. */}}
{{- define "hub.podAnnotations" -}}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}

{{- if .Values.secrets.create }}
checksum/secret: {{ toJson .Values.secrets | sha256sum }}
{{- end }}
{{- if .Values.tls.extraCA }}
checksum/extra-ca: {{ .Values.tls.extraCA | sha256sum }}
{{- end }}
{{- end -}}

{{/* A Deployment's pod annotations: the Jobs' plus where to scrape it. */}}
{{- define "hub.servicePodAnnotations" -}}
{{- with (include "hub.podAnnotations" .) }}
{{ . }}
{{- end }}
{{- if .Values.metrics.podAnnotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metrics.port | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* The chart name of the service whose assertionName is .assertion. */}}
{{- define "hub.serviceNamed" -}}
{{- range $name, $svc := .root.Values.services }}
{{- if eq ($svc.assertionName | default "") $.assertion }}{{ $name }}{{ end }}
{{- end }}
{{- end -}}

{{- define "hub.labels" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/part-of: hub
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end -}}

{{- define "hub.selector" -}}
app.kubernetes.io/name: {{ .name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* Environment of every service: connections and keys from the Secret.
     Internal services: their own database role, the keys the gateway signs
     their assertions with (comma-separated, newest first), the caller keys of
     the services that call them and the caller keys they call others with.
     The gateways: one signing key per upstream. The console: no NATS, only
     its cookie keys. */}}
{{/* Worker threads of a service (actix's and tokio's): services.*.workers,
     else its CPU limit, else its CPU request, rounded up, at least 1. The
     pod's share of CPU, not the node's cores (which a process sees). */}}
{{- define "hub.workers" -}}
{{- $cpu := .workers | default (.resources.limits | default dict).cpu | default (.resources.requests | default dict).cpu | default 1 | toString -}}
{{- if hasSuffix "m" $cpu -}}
{{- max 1 (div (add (trimSuffix "m" $cpu | atoi) 999) 1000) -}}
{{- else -}}
{{- max 1 (ceil ($cpu | float64)) | int -}}
{{- end -}}
{{- end -}}

{{- define "hub.env" -}}
{{- if .root.Values.tls.extraCA }}
{{- range $setting := .svc.caFileSettings | default list }}
- name: {{ $.svc.envPrefix }}__{{ $setting }}
  value: /etc/hub/tls/extra-ca.pem
{{- end }}
{{- end }}
{{- if ne .svc.kind "console" }}
- name: {{ .svc.envPrefix }}__NATS__URL
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: nats-url } }
{{- /* Its own NATS user (the binary's name; the migration Jobs: hub-admin). */}}
{{- if .root.Values.nats.users }}
{{- $natsUser := .natsUser | default .svc.binary }}
- name: {{ .svc.envPrefix }}__NATS__USER
  value: {{ $natsUser | quote }}
- name: {{ .svc.envPrefix }}__NATS__PASSWORD
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: nats-password-{{ $natsUser }} } }
{{- end }}
{{- end }}
- name: {{ .svc.envPrefix }}__HTTP__PORT
  value: {{ .svc.port | quote }}
- name: {{ .svc.envPrefix }}__HTTP__METRICS_PORT
  value: {{ .root.Values.metrics.port | quote }}
{{- if eq .svc.kind "internal" }}
- name: {{ .svc.envPrefix }}__DATABASE__URL
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: {{ .svc.assertionName }}-database-url } }
- name: {{ .svc.envPrefix }}__ASSERTION__KEYS
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: assertion-keys-{{ .svc.assertionName }} } }
{{- $callee := .svc.assertionName }}
{{- range $caller := .svc.callers | default list }}
- name: {{ $.svc.envPrefix }}__ASSERTION__CALLERS__{{ $caller | upper }}__KEYS
  valueFrom: { secretKeyRef: { name: {{ $.root.Values.secrets.name }}, key: caller-keys-{{ $caller }}-to-{{ $callee }} } }
{{- end }}
{{- if has .svc.assertionName (list "org_billing" "kyc" "server_product" "webhook_dispatcher") }}
- name: {{ .svc.envPrefix }}__SEALING__KEYS
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: {{ .svc.binary }}-sealing-keys } }
{{- end }}
{{- if eq .svc.assertionName "org_billing" }}
- name: {{ .svc.envPrefix }}__SEALING__SEARCH_KEY
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: org-billing-search-key } }
{{- end }}
{{- if eq .svc.assertionName "identity" }}
- name: {{ .svc.envPrefix }}__MAIL__SMTP_URL
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: identity-smtp-url } }
- name: {{ .svc.envPrefix }}__SEALING__KEYS
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: identity-sealing-keys } }
{{- end }}
{{- if eq .svc.assertionName "agent" }}
- name: {{ .svc.envPrefix }}__MODEL__API_KEY
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: agent-model-api-key, optional: true } }
{{- end }}
{{- range $call := .svc.calls | default list }}
- name: {{ $.svc.envPrefix }}__{{ $call.envSection }}__KEY
  valueFrom: { secretKeyRef: { name: {{ $.root.Values.secrets.name }}, key: caller-key-{{ $callee }}-to-{{ $call.service }} } }
{{- end }}
{{- else if eq .svc.kind "gateway" }}
{{- range $up, $url := .root.Values.upstreams }}
- name: CORE_API_GATEWAY__ASSERTION__KEYS__{{ $up | upper }}
  valueFrom: { secretKeyRef: { name: {{ $.root.Values.secrets.name }}, key: assertion-key-{{ $up }} } }
{{- end }}
{{- else if eq .svc.kind "console" }}
- name: {{ .svc.envPrefix }}__CONSOLE__COOKIE_KEYS
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: console-cookie-keys } }
{{- end }}
{{- end -}}


{{/* The extra CA ConfigMap's volume and its mount (tls.extraCA). */}}
{{- define "hub.caVolume" -}}
{{- if .Values.tls.extraCA }}
- name: extra-ca
  configMap: { name: {{ include "hub.joinName" (dict "prefix" .Release.Name "suffix" "extra-ca") }} }
{{- end }}
{{- end -}}
{{- define "hub.caMount" -}}
{{- if .Values.tls.extraCA }}
- name: extra-ca
  mountPath: /etc/hub/tls
  readOnly: true
{{- end }}
{{- end -}}

{{/* checkov (scripts/helm-check.sh) findings this chart accepts, each with
     its reason, as annotations on every Deployment and Job. */}}
{{- define "hub.checkovSkips" -}}
checkov.io/skip1: CKV_K8S_11=No CPU limit on purpose - a CFS quota throttles a pod below its fair share in bursts; the CPU request reserves what each pod needs
checkov.io/skip2: CKV_K8S_35=The services read their settings, keys included, from the environment only (layered settings - defaults, file, environment); each variable names a Secret key, no value is in the manifest
checkov.io/skip3: CKV_K8S_15=The image is pinned (image.digest, or a release tag never pushed twice) - Always only adds a registry round trip to every pod start and lets a registry outage stop restarts
{{- if not .Values.image.digest }}
checkov.io/skip4: CKV_K8S_43=image.digest is unset here (the example values have no image to pin); set it in production, as values-production.yaml does, and this check runs
{{- end }}
{{- end -}}
