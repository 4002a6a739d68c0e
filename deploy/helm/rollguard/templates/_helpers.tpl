{{/* The release's objects are named after it: <release>-rollguard, or the release alone when it
contains "rollguard". */}}
{{- define "rollguard.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "rollguard.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rollguard.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* What the controller does in a namespace it watches, and nothing more (the controller checks
each verb before a roll, and a missing one is an Event naming it):
  statefulsets  get, list, watch: it follows them; patch: its status annotation
  pods          get, list: the nodes; delete: the restart (its StatefulSet makes it again)
  configmaps    get, list, watch: the properties file and the settings, followed; create,
                update: each roll's journal (rollguard-roll-<id>)
  leases        get, create, update: one Lease per cluster (rollguard-roll-<cluster>), released
                by clearing its holder, never deleted
  events        create: what `kubectl describe` shows */}}
{{- define "rollguard.rules" -}}
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}
