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
#   Opaque; a ConfigMap's values by key: NO_PROXY characters, PEM certificates as
#   ca-bundle.crt, the fixed wgetrc and trust paths, binaryData only truststore.p12;
# - Deployments, StatefulSets, DaemonSets, CronJobs: updates only (no create or delete),
#   changing only the proxy and trust variables of containers and init containers, the
#   read-only trust volume egress-proxy-trust (a configMap volume of an egress-proxy-*
#   ConfigMap) and its mounts at /etc/egress-proxy/trust, and the pod-template annotations
#   egressproxy.io/config-hash, egressproxy.io/credential and egressproxy.io/trust-bundle:
#   never an image, command, securityContext, serviceAccountName, another volume or mount,
#   replicas or anything else;
# - probe Jobs: created only in the allow-listed shape (docs/security.md);
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
# opt-in labels of Namespaces, workloads, Nodes and ServiceCIDRs; and create Events, and
# TokenReviews and SubjectAccessReviews (who may scrape /metrics).
# It may not read any Secret or ConfigMap cluster-wide and may write nothing in a namespace
# until that namespace's admin binds the tenant role below there (deploy/tenant.yaml), and it
# may read a Secret or CA ConfigMap of another namespace only when its owner grants that one
# object (deploy/source-grant.yaml).
#
# Generated from the Helm chart (charts/egress-proxy-operator/templates/rbac.yaml, release
# egress-proxy-operator in egress-proxy-system, default values): edit the chart, then run
# scripts/chart-test.sh --write-rbac. The chart test fails when this file differs.
#
# Tested: operator/tests/it/tenancy.rs runs the operator binary with a token of exactly this
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
    "--metrics-auth=kubernetes",
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
    fails(lambda: chart_schema({"metrics": {"auth": "open"}}), helm.HelmValuesError, "metrics.auth open")
    fails(lambda: render({"leaderElection": {"enabled": False}}), helm.HelmError, "2 replicas, no election")
    fails(lambda: render({"networkPolicy": {"enabled": True}}), helm.HelmError, "netpol without API server")
    render({"leaderElection": {"enabled": False}, "replicaCount": 1})


def chart_schema(values: dict) -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)


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
        "trustRoots": {"configMap": "base-roots", "key": "debian.pem"},
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
        "run", "--admin-addr=0.0.0.0:8080", "--metrics-auth=kubernetes",
        "--probe-image=registry.local/epo-probe:1",
        "--trust-roots=/etc/egress-proxy-operator/trust-roots/debian.pem",
        "--namespace=team-a", "--namespace=team-b",
        "--cluster-domain=corp.local", "--service-cidr=10.96.0.0/12", "--pod-cidr=10.244.0.0/16",
        "--pod-cidr=fd00::/48", "--log-level=debug", "--log-format=text", "--workers=4",
    ], f"args {c['args']}")
    expect(c["image"] == "registry.local/epo@sha256:" + "a" * 64, c["image"])
    expect(c["volumeMounts"] == [{"name": "trust-roots", "readOnly": True,
                                  "mountPath": "/etc/egress-proxy-operator/trust-roots"}],
           f"trust roots mount {c.get('volumeMounts')}")
    expect(pod["spec"]["volumes"] == [{"name": "trust-roots", "configMap": {"name": "base-roots"}}],
           f"trust roots volume {pod['spec'].get('volumes')}")
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


def rules_of(obj: dict) -> list[tuple[str, str, str]]:
    """(group or URL, resource, verb) of every rule of a Role or ClusterRole."""
    out = []
    for r in obj["rules"]:
        for verb in r["verbs"]:
            for url in r.get("nonResourceURLs", []):
                out.append((url, "", verb))
            for g in r.get("apiGroups", []):
                out.extend((g, res, verb) for res in r["resources"])
    return sorted(out)


def bound_to(objs: list[dict], kind: str, role: str) -> list[dict]:
    return [b for b in find(objs, kind) if b["roleRef"]["name"] == role]


def metrics_need_a_reviewed_token() -> None:
    sa = {"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}
    objs = objects()
    auth = one(objs, "ClusterRole", f"{RELEASE}-metrics-auth")
    expect(rules_of(auth) == [("authentication.k8s.io", "tokenreviews", "create"),
                              ("authorization.k8s.io", "subjectaccessreviews", "create")], str(auth))
    (crb,) = bound_to(objs, "ClusterRoleBinding", f"{RELEASE}-metrics-auth")
    expect(crb["subjects"] == [sa], str(crb["subjects"]))
    reader = one(objs, "ClusterRole", f"{RELEASE}-metrics-reader")
    expect(rules_of(reader) == [("/metrics", "", "get")], str(reader))
    expect(not bound_to(objs, "ClusterRoleBinding", f"{RELEASE}-metrics-reader"), "reader bound by default")
    main = one(objs, "ClusterRole", RELEASE)
    expect(not [r for r in rules_of(main) if "review" in r[1]], "reviews in the main role")

    readers = [{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}]
    objs = objects({"metrics": {"auth": "kubernetes", "readers": readers,
                                "serviceMonitor": {"enabled": True}}})
    expect([b["subjects"] for b in bound_to(objs, "ClusterRoleBinding", f"{RELEASE}-metrics-reader")]
           == [readers, [{"kind": "ServiceAccount", "name": f"{RELEASE}-metrics-scraper",
                          "namespace": NAMESPACE}]], "readers and the scraper")
    secret = one(objs, "Secret", f"{RELEASE}-metrics-scraper")
    expect(secret["type"] == "kubernetes.io/service-account-token", str(secret))
    expect(secret["metadata"]["annotations"] == {"kubernetes.io/service-account.name": f"{RELEASE}-metrics-scraper"},
           str(secret["metadata"]))
    scraper = one(objs, "ServiceAccount", f"{RELEASE}-metrics-scraper")
    expect(scraper["automountServiceAccountToken"] is False, "the scraper's token is not mounted")
    endpoint = one(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    expect(endpoint["authorization"] == {"type": "Bearer", "credentials":
                                         {"name": f"{RELEASE}-metrics-scraper", "key": "token"}}, str(endpoint))
    expect("bearerTokenFile" not in endpoint, str(endpoint))

    token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token"
    objs = objects({"metrics": {"auth": "kubernetes", "serviceMonitor": {"enabled": True, "bearerTokenFile": token_file}}})
    endpoint = one(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    expect(endpoint.get("bearerTokenFile") == token_file and "authorization" not in endpoint, str(endpoint))
    expect(not find(objs, "Secret") and not find(objs, "ServiceAccount", f"{RELEASE}-metrics-scraper"), "scraper")

    objs = objects({"metrics": {"auth": "none", "serviceMonitor": {"enabled": True}}})
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    expect("--metrics-auth=none" in args and "--metrics-auth=kubernetes" not in args, str(args))
    for role in ("metrics-auth", "metrics-reader"):
        expect(not find(objs, "ClusterRole", f"{RELEASE}-{role}"), f"{role} with auth none")
    endpoint = one(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    expect("authorization" not in endpoint and "bearerTokenFile" not in endpoint, str(endpoint))
    expect(not find(objs, "Secret"), "a scraper token with auth none")


def namespaced_install_grants_nothing_cluster_wide_to_workloads() -> None:
    objs = objects({"watchNamespaces": ["team-a", "team-b"]})
    expect(not bound_to(objs, "ClusterRoleBinding", RELEASE),
           "a ClusterRoleBinding of the operator's workload ClusterRole in a namespaced install")
    where = sorted((b["metadata"]["namespace"], b["metadata"]["name"])
                   for b in bound_to(objs, "RoleBinding", RELEASE))
    expect(where == [("team-a", f"{RELEASE}-watch"), ("team-b", f"{RELEASE}-watch")], str(where))
    cluster_scoped = {"namespaces", "nodes", "servicecidrs", "networks", "infrastructures", "ippools",
                      "ciliumnodes"}
    rules = rules_of(one(objs, "ClusterRole", RELEASE))
    expect(not [r for r in rules if r[1] in cluster_scoped], f"cluster-scoped rules: {rules}")
    # Only the reviews of /metrics are cluster-wide (they are cluster-scoped).
    crbs = sorted(b["roleRef"]["name"] for b in find(objs, "ClusterRoleBinding"))
    expect(crbs == [f"{RELEASE}-metrics-auth"], str(crbs))
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    expect("--namespace=team-a" in args and "--namespace=team-b" in args, str(args))
    # Cluster-wide: one binding, no RoleBinding of the role.
    objs = objects()
    expect(len(bound_to(objs, "ClusterRoleBinding", RELEASE)) == 1, "cluster-wide binding")
    expect(not bound_to(objs, "RoleBinding", RELEASE), "RoleBindings of the role cluster-wide")


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
               metrics_need_a_reviewed_token, namespaced_install_grants_nothing_cluster_wide_to_workloads,
               notes_tell_how_to_opt_in):
        check(fn.__name__, fn)
