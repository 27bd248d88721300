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

{{/* Environment shared by every service: connections and keys from the Secret. */}}
{{- define "hub.env" -}}
- name: {{ .svc.envPrefix }}__DATABASE__URL
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: database-url } }
- name: {{ .svc.envPrefix }}__NATS__URL
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: nats-url } }
- name: {{ .svc.envPrefix }}__ASSERTION__KEYS
  valueFrom: { secretKeyRef: { name: {{ .root.Values.secrets.name }}, key: assertion-keys } }
- name: {{ .svc.envPrefix }}__HTTP__PORT
  value: {{ .svc.port | quote }}
{{- end -}}
