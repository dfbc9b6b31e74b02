"""The chart rendered offline with Helm (helm-python-sdk): lint, schema, the rendered objects,
and deploy/rbac.yaml and deploy/admission.yaml, which are generated from the chart's
templates/rbac.yaml and templates/admission.yaml."""

from __future__ import annotations

import helm_python as helm
import yaml

from common import CHART, NAMESPACE, RELEASE, ROOT, check, expect, fails

RBAC_FILE = ROOT / "deploy" / "rbac.yaml"
ADMISSION_FILE = ROOT / "deploy" / "admission.yaml"

# deploy/admission.yaml: this header, then templates/admission.yaml rendered as above.
ADMISSION_HEADER = """\
# What the operator's writes may change, enforced by the API server (ValidatingAdmissionPolicy,
# GA since Kubernetes 1.30). RBAC lets the operator write Secrets, ConfigMaps and workloads in
# opted-in namespaces; this narrows each write to what the operator does:
# - Secrets and ConfigMaps: only named egress-proxy-*, labelled
#   app.kubernetes.io/managed-by=egress-proxy-operator (before and after), Secrets of type
#   Opaque;
# - Deployments, StatefulSets, DaemonSets: updates only (no create or delete), changing only
#   the proxy variables of containers and init containers and the pod-template annotations
#   egressproxy.io/config-hash and egressproxy.io/credential: never an image, command, securityContext, serviceAccountName,
#   volumes, replicas or anything else;
# - EgressProxyPolicies: only their finalizers (status is a separate subresource).
# It matches the operator's ServiceAccount only; nobody else's writes are affected.
# See docs/security.md.
#
# Generated from the Helm chart (charts/egress-proxy-operator/templates/admission.yaml, release
# egress-proxy-operator in egress-proxy-system, default values): edit the chart, then run
# scripts/chart-test.sh --write-rbac. The chart test fails when this file differs.
# Apply with: kubectl apply -f deploy/admission.yaml
"""

# deploy/rbac.yaml: this header, the Namespace, then templates/rbac.yaml rendered for
# release egress-proxy-operator in namespace egress-proxy-system with the default values.
RBAC_HEADER = """\
# What egress-proxy-operator may do, for the ServiceAccount it runs as. The design, and what a
# stolen token of this account can and cannot do (measured), are in docs/security.md.
#
# Cluster-wide it may only read: its policies (and write their status and finalizer), the
# opt-in labels of Namespaces, workloads, Nodes and ServiceCIDRs; and create Events.
# It may not read any Secret or ConfigMap cluster-wide and may write nothing in a namespace
# until that namespace's admin binds the tenant role below there (deploy/tenant.yaml), and it
# may read a Secret of another namespace only when the Secret's owner grants that one Secret
# (deploy/source-grant.yaml).
#
# Generated from the Helm chart (charts/egress-proxy-operator/templates/rbac.yaml, release
# egress-proxy-operator in egress-proxy-system, default values): edit the chart, then run
# scripts/chart-test.sh --write-rbac. The chart test fails when this file differs.
#
# Tested: operator/tests/tenancy.rs runs the operator binary with a token of exactly this
# account against the in-memory API server, which enforces RBAC.
# Apply with: kubectl apply -f crds/ -f deploy/rbac.yaml
apiVersion: v1
kind: Namespace
metadata:
  name: egress-proxy-system
---
"""

EXPECTED_ARGS = [
    "run",
    "--leader-elect",
    "--lease-name=egress-proxy-operator",
    "--admin-addr=0.0.0.0:8080",
    "--probe-image=egress-proxy-operator:0.1.0",
    "--namespace-selector=egressproxy.io/enabled=true",
    "--log-format=json",
]


def render(values: dict | None = None, namespace: str = NAMESPACE) -> dict[str, str]:
    with helm.Chart.load(CHART) as chart:
        return chart.render(values, name=RELEASE, namespace=namespace, is_install=True)


def objects(values: dict | None = None) -> list[dict]:
    out = []
    for path, text in sorted(render(values).items()):
        if path.endswith(".yaml"):
            out.extend(d for d in yaml.safe_load_all(text) if d)
    return out


def find(objs: list[dict], kind: str, name: str | None = None) -> list[dict]:
    return [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objs: list[dict], kind: str, name: str | None = None) -> dict:
    found = find(objs, kind, name)
    expect(len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}")
    return found[0]


def generated_rbac() -> str:
    body = render()[f"{RELEASE}/templates/rbac.yaml"].strip("\n")
    return RBAC_HEADER + body + "\n"


def generated_admission() -> str:
    body = render()[f"{RELEASE}/templates/admission.yaml"].strip("\n")
    return ADMISSION_HEADER + body + "\n"


def write_rbac() -> None:
    RBAC_FILE.write_text(generated_rbac())
    ADMISSION_FILE.write_text(generated_admission())
    print(f"wrote {RBAC_FILE.relative_to(ROOT)} and {ADMISSION_FILE.relative_to(ROOT)}")


def lint() -> None:
    report = helm.lint(CHART, strict=True, namespace=NAMESPACE)
    problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
    expect(not problems, f"helm lint --strict: {problems}")


def schema_is_strict() -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema({})
        for bad in (
            {"replicas": 3},
            {"logFormat": "xml"},
            {"image": {"repository": "r", "registry": "x"}},
            {"serviceCIDRs": ["10.96.0.0"]},
            {"networkPolicy": {"enabled": True, "apiServer": [{"cidr": "10.0.0.1/32"}]}},
        ):
            fails(lambda b=bad: chart.validate_schema(b), helm.HelmValuesError, f"values {bad}")
    fails(lambda: render({"leaderElection": {"enabled": False}}), helm.HelmError, "2 replicas, no election")
    fails(lambda: render({"networkPolicy": {"enabled": True}}), helm.HelmError, "netpol without API server")
    render({"leaderElection": {"enabled": False}, "replicaCount": 1})


def the_crd_is_the_generated_one() -> None:
    committed = (ROOT / "crds" / "egressproxypolicies.egressproxy.io.yaml").read_text()
    with helm.Chart.load(CHART) as chart:
        crds = chart.crds
    names = [c["name"] for c in crds]
    expect(names == ["crds/egressproxypolicies.egressproxy.io.yaml"], f"the chart's CRDs: {names}")
    expect(crds[0]["data"] == committed, "the chart's CRD differs from crds/; copy it over")


def deploy_rbac_is_the_chart_rendering() -> None:
    expect(
        RBAC_FILE.read_text() == generated_rbac(),
        "deploy/rbac.yaml differs from the chart's rendering; run scripts/chart-test.sh --write-rbac",
    )


def deploy_admission_is_the_chart_rendering() -> None:
    expect(
        ADMISSION_FILE.read_text() == generated_admission(),
        "deploy/admission.yaml differs from the chart's rendering; run scripts/chart-test.sh --write-rbac",
    )
    # Another release or namespace: the policy matches that release's ServiceAccount.
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(None, name="epo", namespace="ops", is_install=True)
    text = next(t for path, t in rendered.items() if path.endswith("/templates/admission.yaml"))
    expect("'system:serviceaccount:ops:epo-egress-proxy-operator'" in text, "the policy's subject")
    off = render({"admissionPolicy": {"enabled": False}})
    expect(not off.get(f"{RELEASE}/templates/admission.yaml", "").strip(), "admissionPolicy.enabled=false")


def default_deployment() -> None:
    objs = objects()
    dep = one(objs, "Deployment", RELEASE)
    expect(dep["spec"]["replicas"] == 2, "two replicas")
    pod = dep["spec"]["template"]["spec"]
    expect(pod["serviceAccountName"] == RELEASE and pod["automountServiceAccountToken"] is True, "account")
    expect(pod["securityContext"]["runAsNonRoot"] is True, "pod runAsNonRoot")
    expect(pod["securityContext"]["runAsUser"] == 65532, "pod runAsUser")
    expect(pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, "pod seccomp")
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    expect(anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname", "spread")
    (c,) = pod["containers"]
    expect(c["args"] == EXPECTED_ARGS, f"args {c['args']}")
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]}
    expect(env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}, str(env))
    sc = c["securityContext"]
    expect(sc["runAsNonRoot"] and sc["runAsUser"] == 65532 and sc["readOnlyRootFilesystem"], str(sc))
    expect(sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}, str(sc))
    expect(sc["seccompProfile"] == {"type": "RuntimeDefault"}, str(sc))
    expect(c["ports"] == [{"name": "admin", "containerPort": 8080, "protocol": "TCP"}], str(c["ports"]))
    expect(c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}, "liveness")
    expect(c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}, "readiness")
    expect(c["image"] == "egress-proxy-operator:0.1.0", c["image"])
    expect(c["resources"]["requests"] and c["resources"]["limits"]["memory"], "resources")


def default_objects() -> None:
    objs = objects()
    kinds = sorted({o["kind"] for o in objs})
    expect(
        kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget",
                  "Role", "RoleBinding", "ServiceAccount", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding"],
        f"kinds {kinds}",
    )
    tenant = f"{RELEASE}-tenant"
    one(objs, "ClusterRole", tenant)
    bound = [b for b in find(objs, "RoleBinding") + find(objs, "ClusterRoleBinding")
             if b["roleRef"]["name"] == tenant]
    expect(not bound, f"the tenant role is bound by default: {bound}")
    where = sorted((r["metadata"]["namespace"], r["metadata"]["name"]) for r in find(objs, "Role"))
    expect(where == [("default", f"{RELEASE}-discovery"), (NAMESPACE, f"{RELEASE}-leader"),
                     ("kube-system", f"{RELEASE}-discovery")], str(where))
    pdb = one(objs, "PodDisruptionBudget")
    expect(pdb["spec"]["maxUnavailable"] == 1, "pdb")
    for o in objs:
        labels = o["metadata"].get("labels", {})
        expect("app.kubernetes.io/managed-by" not in labels, "Helm adds managed-by itself")


def values_reach_the_objects() -> None:
    objs = objects({
        "watchNamespaces": ["team-a", "team-b"], "clusterDomain": "corp.local",
        "serviceCIDRs": ["10.96.0.0/12"], "podCIDRs": ["10.244.0.0/16", "fd00::/48"],
        "logLevel": "debug", "logFormat": "text", "extraArgs": ["--workers=4"],
        "verification": {"probeImage": "registry.local/epo-probe:1"},
        "image": {"repository": "registry.local/epo", "digest": "sha256:" + "a" * 64},
        "tenantNamespaces": ["team-a"], "leaderElection": {"enabled": False}, "replicaCount": 1,
        "podDisruptionBudget": {"enabled": False}, "priorityClassName": "system-cluster-critical",
        "nodeSelector": {"kubernetes.io/os": "linux"}, "imagePullSecrets": [{"name": "pull"}],
        "podAnnotations": {"a": "b"}, "podLabels": {"team": "platform"},
        "metrics": {"serviceMonitor": {"enabled": True}},
        "networkPolicy": {"enabled": True, "apiServer": [{"cidr": "10.0.0.1/32", "port": 6443}],
                          "dns": True},
    })
    pod = one(objs, "Deployment")["spec"]["template"]
    c = pod["spec"]["containers"][0]
    expect(c["args"] == [
        "run", "--admin-addr=0.0.0.0:8080", "--probe-image=registry.local/epo-probe:1",
        "--namespace=team-a", "--namespace=team-b",
        "--cluster-domain=corp.local", "--service-cidr=10.96.0.0/12", "--pod-cidr=10.244.0.0/16",
        "--pod-cidr=fd00::/48", "--log-level=debug", "--log-format=text", "--workers=4",
    ], f"args {c['args']}")
    expect(c["image"] == "registry.local/epo@sha256:" + "a" * 64, c["image"])
    vap = one(objs, "ValidatingAdmissionPolicy")
    probe_rule = [v["expression"] for v in vap["spec"]["validations"]
                  if "c.image ==" in v["expression"]]
    expect(len(probe_rule) == 1 and "'registry.local/epo-probe:1'" in probe_rule[0],
           f"the admission policy allows probe Jobs of verification.probeImage: {probe_rule}")
    expect(pod["metadata"]["annotations"] == {"a": "b"} and pod["metadata"]["labels"]["team"] == "platform", "pod meta")
    spec = pod["spec"]
    expect(spec["priorityClassName"] == "system-cluster-critical" and spec["imagePullSecrets"] == [{"name": "pull"}], "pod spec")
    binding = one(objs, "RoleBinding", RELEASE)
    expect(binding["metadata"]["namespace"] == "team-a", "tenant binding namespace")
    expect(binding["roleRef"]["name"] == f"{RELEASE}-tenant", "tenant binding role")
    expect(not find(objs, "PodDisruptionBudget"), "pdb disabled")
    one(objs, "Service")
    expect(one(objs, "ServiceMonitor")["spec"]["endpoints"][0]["path"] == "/metrics", "monitor")
    egress = one(objs, "NetworkPolicy")["spec"]["egress"]
    expect(egress[0] == {"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
                         "ports": [{"port": 6443, "protocol": "TCP"}]}, str(egress))
    expect({p["port"] for p in egress[1]["ports"]} == {53}, "dns")


def discovery_sources_switch_flags_and_rbac() -> None:
    def rules(objs: list[dict]) -> tuple[list[str], list[str]]:
        cluster = one(objs, "ClusterRole", RELEASE)["rules"]
        system = [r for o in find(objs, "Role") if o["metadata"]["namespace"] == "kube-system"
                  for r in o["rules"]]
        groups = [g for r in cluster for g in r["apiGroups"]]
        resources = [f"{r['apiGroups'][0]}/{res}" for r in system for res in r["resources"]]
        return groups, resources

    objs = objects()
    groups, system = rules(objs)
    for g in ("config.openshift.io", "crd.projectcalico.org", "cilium.io"):
        expect(g in groups, f"default ClusterRole lacks {g}: {groups}")
    for r in ("/pods", "apps/deployments"):
        expect(r in system, f"default kube-system Role lacks {r}: {system}")
    expect(not [o for o in find(objs, "Role") if o["metadata"]["namespace"] == "openshift-dns"],
           "an openshift-dns Role without OpenShift's API")
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    expect(not [a for a in args if a.startswith("--disable-discovery-source")], f"{args}")

    objs = objects({"discoverySources": {"calico": False, "kubeApiserver": False}})
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    off = [a for a in args if a.startswith("--disable-discovery-source")]
    expect(off == ["--disable-discovery-source=calico",
                   "--disable-discovery-source=kube-apiserver"], f"{off}")
    groups, system = rules(objs)
    expect("crd.projectcalico.org" not in groups and "cilium.io" in groups, f"{groups}")
    expect("/pods" not in system and "apps/deployments" in system, f"{system}")


def notes_tell_how_to_opt_in() -> None:
    notes = render()[f"{RELEASE}/templates/NOTES.txt"]
    for needle in ("kubectl label namespace team-a egressproxy.io/enabled=true",
                   f"name: {RELEASE}-tenant", "kind: EgressProxyPolicy", "--for=condition=Ready"):
        expect(needle in notes, f"NOTES.txt lacks {needle!r}")


def run_all() -> None:
    for fn in (lint, schema_is_strict, the_crd_is_the_generated_one,
               deploy_rbac_is_the_chart_rendering, deploy_admission_is_the_chart_rendering,
               default_deployment, default_objects,
               values_reach_the_objects, discovery_sources_switch_flags_and_rbac,
               notes_tell_how_to_opt_in):
        check(fn.__name__, fn)
