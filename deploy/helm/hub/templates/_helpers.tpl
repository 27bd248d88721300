{{- define "hub.fullname" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
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
     The gateways: one signing key per upstream. */}}
{{- define "hub.env" -}}
{{- if .root.Values.tls.extraCA }}
{{- range $setting := .svc.caFileSettings | default list }}
- name: {{ $.svc.envPrefix }}__{{ $setting }}
  value: /etc/hub/tls/extra-ca.pem
{{- end }}
{{- end }}
- name: {{ .svc.envPrefix }}__NATS__URL
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: nats-url } }
- name: {{ .svc.envPrefix }}__HTTP__PORT
  value: {{ .svc.port | quote }}
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
{{- else }}
{{- range $up, $url := .root.Values.upstreams }}
- name: CORE_API_GATEWAY__ASSERTION__KEYS__{{ $up | upper }}
  valueFrom: { secretKeyRef: { name: {{ $.root.Values.secrets.name }}, key: assertion-key-{{ $up }} } }
{{- end }}
{{- end }}
{{- end -}}


{{/* The extra CA ConfigMap's volume and its mount (tls.extraCA). */}}
{{- define "hub.caVolume" -}}
{{- if .Values.tls.extraCA }}
- name: extra-ca
  configMap: { name: {{ .Release.Name }}-extra-ca }
{{- end }}
{{- end -}}
{{- define "hub.caMount" -}}
{{- if .Values.tls.extraCA }}
- name: extra-ca
  mountPath: /etc/hub/tls
  readOnly: true
{{- end }}
{{- end -}}
