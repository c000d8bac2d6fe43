{{/* The objects' name: cdigen, cdigen-device-plugin or cdigen-dra by mode. */}}
{{- define "cdigen.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if eq .Values.mode "generate" -}}
cdigen
{{- else if eq .Values.mode "device-plugin" -}}
cdigen-device-plugin
{{- else if eq .Values.mode "dra" -}}
cdigen-dra
{{- else -}}
{{- fail (printf "mode %q: must be generate, device-plugin or dra" .Values.mode) -}}
{{- end -}}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "cdigen.labels" -}}
app.kubernetes.io/name: {{ include "cdigen.fullname" . }}
app.kubernetes.io/part-of: cdigen
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The pods' selector. */}}
{{- define "cdigen.selector" -}}
app.kubernetes.io/name: {{ include "cdigen.fullname" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The ConfigMap of definitions and templates the pods read. */}}
{{- define "cdigen.configMap" -}}
{{- .Values.generators.existingConfigMap | default (printf "%s-config" (include "cdigen.fullname" .)) -}}
{{- end -}}

{{/*
The host paths every mode reads, mounted read-only under /host at the
same path: name, path, hostPath type, recursive read-only, propagation.
docs/kubernetes-deploy.md says why each is there.
*/}}
{{- define "cdigen.hostReads" -}}
- {name: host-sys, path: /sys, type: Directory, recursive: true}
- {name: host-proc, path: /proc, type: Directory, recursive: true}
- {name: host-dev, path: /dev, type: Directory, recursive: true}
- {name: host-usr, path: /usr, type: Directory, recursive: true}
- {name: host-lib, path: /lib, type: "", recursive: true}
- {name: host-lib64, path: /lib64, type: "", recursive: true}
- {name: host-bin, path: /bin, type: "", recursive: true}
- {name: host-etc, path: /etc, type: Directory, recursive: true}
- {name: host-run-nvidia, path: /run/nvidia, type: DirectoryOrCreate, propagation: HostToContainer}
- {name: host-run-nvidia-persistenced, path: /run/nvidia-persistenced, type: DirectoryOrCreate}
- {name: host-run-nvidia-fabricmanager, path: /run/nvidia-fabricmanager, type: DirectoryOrCreate}
- {name: host-run-udev, path: /run/udev, type: DirectoryOrCreate}
{{- range $i, $p := .Values.extraHostPaths }}
- {name: host-extra-{{ $i }}, path: {{ $p | quote }}, type: Directory, recursive: true}
{{- end }}
{{- end -}}
