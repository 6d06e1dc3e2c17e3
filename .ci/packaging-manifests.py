"""Validates the Kubernetes manifests given on the command line (.ci/packaging-checks runs it
inside a virtual environment holding its two checkers):

- every object of the Kubernetes API against the OpenAPI schemas kubernetes-validate bundles,
  for every Kubernetes release it bundles, strictly (a field the schema does not have fails);
- every monitoring.coreos.com/v1 object against the models cloudcoil-models-prometheus-operator
  generates from the Prometheus Operator's CRDs (types, required fields, patterns), and no field
  the CRD does not have (the models drop unknown fields silently, so what they keep is compared
  with what was given);
- the references between the files: the Service and the monitors select the DaemonSet's pods,
  and the port they name is one the pods' container or the Service declares.

Prints one line per object and check; exits 1 when any fails, 0 otherwise.
"""

import sys

import kubernetes_validate
import yaml
from cloudcoil.models.prometheus_operator import v1 as monitoring

MONITORING = "monitoring.coreos.com/v1"
CRD_KINDS = {
    "ServiceMonitor": monitoring.ServiceMonitor,
    "PodMonitor": monitoring.PodMonitor,
    "PrometheusRule": monitoring.PrometheusRule,
}


def unknown_fields(given, kept, path):
    """The paths of fields in `given` that the model's dump `kept` does not have."""
    if isinstance(given, dict) and isinstance(kept, dict):
        for key, value in given.items():
            if key not in kept:
                yield f"{path}.{key}"
            else:
                yield from unknown_fields(value, kept[key], f"{path}.{key}")
    elif isinstance(given, list) and isinstance(kept, list):
        for i, (g, k) in enumerate(zip(given, kept)):
            yield from unknown_fields(g, k, f"{path}[{i}]")


def name_of(doc, file):
    meta = doc.get("metadata") or {}
    return f"{file}: {doc.get('kind')}/{meta.get('name')}"


def check_core(doc, where, versions):
    failures = []
    for version in versions:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path) or "(top)"
            failures.append(f"{where}: Kubernetes {version}: at {path}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError:
            failures.append(
                f"{where}: Kubernetes {version} has no {doc.get('apiVersion')} {doc.get('kind')}: use an API version it serves"
            )
    return failures


def check_crd(doc, where):
    model = CRD_KINDS.get(doc.get("kind"))
    if model is None:
        return [f"{where}: no CRD schema here for {MONITORING} {doc.get('kind')}: add it to CRD_KINDS in {__file__}"]
    try:
        kept = model.model_validate(doc).model_dump(by_alias=True, exclude_unset=True)
    except Exception as e:  # pydantic's ValidationError: its text names every field
        return [f"{where}: against the Prometheus Operator's CRD: {e}"]
    return [
        f"{where}: {path}: the Prometheus Operator's CRD has no such field"
        for path in unknown_fields(doc, kept, "")
    ]


def selects(selector, labels):
    wanted = (selector or {}).get("matchLabels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


def check_references(docs):
    failures = []
    daemonsets = [(w, d) for w, d in docs if d.get("kind") == "DaemonSet"]
    services = [(w, d) for w, d in docs if d.get("kind") == "Service"]
    for where, ds in daemonsets:
        template = ds["spec"]["template"]
        labels = template["metadata"].get("labels") or {}
        if not selects(ds["spec"].get("selector"), labels):
            failures.append(f"{where}: spec.selector does not select its own pod template's labels")
    pods = [
        (ds["spec"]["template"]["metadata"].get("labels") or {}, ds["spec"]["template"]["spec"])
        for _, ds in daemonsets
    ]
    pod_ports = lambda spec: {p.get("name") for c in spec["containers"] for p in c.get("ports", [])}
    for where, svc in services:
        matched = [spec for labels, spec in pods if all(labels.get(k) == v for k, v in (svc["spec"].get("selector") or {}).items())]
        if not matched:
            failures.append(f"{where}: spec.selector selects no DaemonSet's pods")
        for port in svc["spec"].get("ports", []):
            target = port.get("targetPort")
            if isinstance(target, str) and not any(target in pod_ports(s) for s in matched):
                failures.append(f"{where}: targetPort {target!r} is no port of the pods it selects")
    for where, mon in docs:
        kind = mon.get("kind")
        if kind == "ServiceMonitor":
            targets = [s for _, s in services if selects(mon["spec"].get("selector"), s["metadata"].get("labels") or {})]
            if not targets:
                failures.append(f"{where}: spec.selector selects no Service in these files")
            names = {p.get("name") for s in targets for p in s["spec"].get("ports", [])}
            for e in mon["spec"].get("endpoints", []):
                if e.get("port") not in names:
                    failures.append(f"{where}: endpoint port {e.get('port')!r} is no port of the Services it selects")
        elif kind == "PodMonitor":
            matched = [spec for labels, spec in pods if selects(mon["spec"].get("selector"), labels)]
            if not matched:
                failures.append(f"{where}: spec.selector selects no DaemonSet's pods in these files")
            for e in mon["spec"].get("podMetricsEndpoints", []):
                if not any(e.get("port") in pod_ports(s) for s in matched):
                    failures.append(f"{where}: endpoint port {e.get('port')!r} is no port of the pods it selects")
    return failures


def main(files):
    versions = kubernetes_validate.utils.all_versions()
    docs = []
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                loaded = [d for d in yaml.safe_load_all(f) if d is not None]
        except (OSError, yaml.YAMLError) as e:
            print(f"FAIL {file}: not readable YAML: {e}")
            return 1
        docs += [(name_of(d, file), d) if isinstance(d, dict) else (f"{file}: a document that is not a mapping", None) for d in loaded]
    failures = []
    for where, doc in docs:
        if doc is None:
            failures.append(f"{where}: expected a Kubernetes object")
            continue
        if doc.get("apiVersion") == MONITORING:
            found = check_crd(doc, where)
            checked = "the Prometheus Operator's CRD"
        else:
            found = check_core(doc, where, versions)
            checked = f"Kubernetes {versions[0]} to {versions[-1]}"
        failures += found
        print(f"{'FAIL' if found else 'ok  '} {where} against {checked}")
    if failures:
        print("skip references between the manifests (checked once every object passes its schema)")
    else:
        found = check_references([(w, d) for w, d in docs if d is not None])
        failures += found
        print(f"{'FAIL' if found else 'ok  '} references between the manifests")
    for failure in failures:
        print(f"  {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
