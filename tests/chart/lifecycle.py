"""The release's life against kube-sim with real Helm: install, the operator run with the
installed Deployment's args, upgrade, rollback, uninstall."""

from __future__ import annotations

import re
import signal
import subprocess
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import helm_python as helm

from cluster import Kubectl, server_of, token_kubeconfig
from common import CHART, NAMESPACE, RELEASE, ROOT, CheckFailed, expect, wait_for

CRD = "egressproxypolicies.egressproxy.io"
# Objects the chart creates with the default values: (kind, namespace or "", name).
RELEASED = [
    ("deployment", NAMESPACE, RELEASE),
    ("poddisruptionbudget", NAMESPACE, RELEASE),
    ("serviceaccount", NAMESPACE, RELEASE),
    ("clusterrole", "", RELEASE),
    ("clusterrole", "", f"{RELEASE}-tenant"),
    ("clusterrolebinding", "", RELEASE),
    ("role", "default", f"{RELEASE}-discovery"),
    ("rolebinding", "default", f"{RELEASE}-discovery"),
    ("role", "kube-system", f"{RELEASE}-discovery"),
    ("rolebinding", "kube-system", f"{RELEASE}-discovery"),
    ("role", NAMESPACE, f"{RELEASE}-leader"),
    ("rolebinding", NAMESPACE, f"{RELEASE}-leader"),
    ("clusterrole", "", f"{RELEASE}-metrics-auth"),
    ("clusterrolebinding", "", f"{RELEASE}-metrics-auth"),
    ("clusterrole", "", f"{RELEASE}-metrics-reader"),
    ("clusterrolebinding", "", f"{RELEASE}-metrics-reader"),
]
# An account of the cluster's monitoring, bound to the metrics-reader role by metrics.readers.
SCRAPER = "scraper"


def ref(kind: str, namespace: str, name: str) -> list[str]:
    return [f"{kind}/{name}"] + (["-n", namespace] if namespace else [])


class Release:
    def __init__(self, kubectl: Kubectl, admin_port: int, binary: Path, workdir: Path):
        self.kubectl = kubectl
        self.values = {"admin": {"port": admin_port}, "metrics": {"auth": "kubernetes", "readers": [
            {"kind": "ServiceAccount", "name": SCRAPER, "namespace": "default"}]}}
        self.admin_port = admin_port
        self.binary = binary
        self.workdir = workdir
        self.cfg = helm.Config(kubeconfig_path=str(kubectl.kubeconfig), namespace=NAMESPACE)
        self.notes = ""

    def args(self) -> list[str]:
        dep = self.kubectl.get("deployment", RELEASE, "-n", NAMESPACE)
        return dep["spec"]["template"]["spec"]["containers"][0]["args"]

    def storage(self) -> list[str]:
        secrets = self.kubectl.get("secrets", "-n", NAMESPACE, "-l", f"owner=helm,name={RELEASE}")
        return sorted(s["metadata"]["name"] for s in secrets["items"] if s["type"] == "helm.sh/release.v1")

    def install(self) -> None:
        r = self.cfg.install(CHART, RELEASE, self.values, create_namespace=True, wait="watcher", timeout=90)
        expect(r["status"] == "deployed" and r["revision"] == 1, f"{r['status']} {r['revision']}")
        self.notes = r["notes"]
        for kind, ns, name in RELEASED:
            expect(self.kubectl.exists(*ref(kind, ns, name)), f"{kind} {ns}/{name} missing")
        dep = self.kubectl.get("deployment", RELEASE, "-n", NAMESPACE)
        expect(dep["status"].get("availableReplicas") == 2, f"available: {dep['status']}")
        crd = self.kubectl.get("crd", CRD)
        established = [c for c in crd["status"]["conditions"] if c["type"] == "Established"]
        expect(established and established[0]["status"] == "True", "CRD not established")
        expect(self.storage() == [f"sh.helm.release.v1.{RELEASE}.v1"], f"storage {self.storage()}")
        expect(f"--admin-addr=0.0.0.0:{self.admin_port}" in self.args(), str(self.args()))

    def upgrade(self) -> None:
        values = dict(self.values, logFormat="text", podDisruptionBudget={"enabled": False})
        r = self.cfg.upgrade(CHART, RELEASE, values, wait="watcher", timeout=90)
        expect(r["revision"] == 2 and r["status"] == "deployed", f"{r['status']} {r['revision']}")
        args = self.args()
        expect("--log-format=text" in args and "--log-format=json" not in args, str(args))
        expect(not self.kubectl.exists(*ref("poddisruptionbudget", NAMESPACE, RELEASE)), "PDB left")
        expect(self.cfg.get_values(RELEASE)["logFormat"] == "text", "values of revision 2")

    def rollback(self) -> None:
        self.cfg.rollback(RELEASE, version=1, wait="watcher", timeout=90)
        history = [(h["revision"], h["status"]) for h in self.cfg.history(RELEASE)]
        expect(history == [(1, "superseded"), (2, "superseded"), (3, "deployed")], str(history))
        args = self.args()
        expect("--log-format=json" in args and "--log-format=text" not in args, str(args))
        expect(self.kubectl.exists(*ref("poddisruptionbudget", NAMESPACE, RELEASE)), "PDB not back")

    def uninstall(self) -> None:
        self.cfg.uninstall(RELEASE, wait="watcher", timeout=90)
        for kind, ns, name in RELEASED:
            expect(not self.kubectl.exists(*ref(kind, ns, name)), f"{kind} {ns}/{name} left")
        expect(self.storage() == [], f"release storage left: {self.storage()}")
        expect(self.kubectl.exists("crd", CRD), "Helm keeps CRDs from crds/ on uninstall")
        expect(self.cfg.list(all_states=True) == [], "release still listed")

    def operator(self) -> None:
        Operator(self).run()

    def cycle_over_crd(self) -> None:
        """Install, upgrade and uninstall over a CRD that was there before this release: Helm
        shares the fields it applies with the same values, and the CRD stays the same object."""
        uid = self.kubectl.get("crd", CRD)["metadata"]["uid"]
        self.install()
        self.upgrade()
        self.uninstall()
        expect(self.kubectl.get("crd", CRD)["metadata"]["uid"] == uid, "the CRD was replaced")


def pre_apply_crd(kubectl: Kubectl, route: str) -> None:
    """The chart's CRD, applied before any release the way GitOps tools and admins do."""
    crds = str(CHART / "crds")
    if route == "kubectl-server-side":
        kubectl.run("apply", "--server-side", "-f", crds)
    elif route == "kubectl-create":
        kubectl.run("create", "-f", crds)
    elif route != "kube-sim-load":
        raise ValueError(route)
    expect(kubectl.exists("crd", CRD), f"no CRD after {route}")


class Operator:
    """The operator binary run as the installed Deployment would run it."""

    def __init__(self, release: Release):
        self.release = release
        self.kubectl = release.kubectl
        self.log_path = release.workdir / "operator.log"

    def argv_and_env(self) -> tuple[list[str], dict[str, str]]:
        dep = self.kubectl.get("deployment", RELEASE, "-n", NAMESPACE)
        container = dep["spec"]["template"]["spec"]["containers"][0]
        expect("command" not in container, "the image's entrypoint is the binary")
        labels = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
        pods = self.kubectl.get("pods", "-n", NAMESPACE, "-l", labels)["items"]
        expect(pods, "no Pod of the Deployment")
        pod = pods[0]
        env = {}
        for e in container["env"]:
            if "value" in e:
                env[e["name"]] = e["value"]
                continue
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            env[e["name"]] = {"metadata.name": pod["metadata"]["name"],
                              "metadata.namespace": pod["metadata"]["namespace"]}[path]
        return [str(self.release.binary), *container["args"]], env

    def run(self) -> None:
        argv, env = self.argv_and_env()
        token = self.kubectl.token(NAMESPACE, RELEASE)
        kubeconfig = token_kubeconfig(self.release.workdir / "operator.kubeconfig",
                                      server_of(self.kubectl.kubeconfig), token)
        env["KUBECONFIG"] = str(kubeconfig)
        log = open(self.log_path, "wb")
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            self.healthy(proc, env["POD_NAME"])
            self.opt_in_and_reconcile()
            stop(proc)
        except BaseException:
            proc.kill()
            proc.wait()
            tail = self.log_path.read_text(errors="replace").splitlines()[-40:]
            print("operator log (last lines):\n  " + "\n  ".join(tail))
            raise
        finally:
            log.close()

    def healthy(self, proc: subprocess.Popen, pod_name: str) -> None:
        base = f"http://127.0.0.1:{self.release.admin_port}"
        for path in ("/healthz", "/readyz"):
            wait_for(f"{path} 200", lambda p=path: alive(proc) and http_status(base + p) == 200, timeout=60)
        # /metrics: reviewed with the chart's RBAC; a token of metrics.readers' account only.
        expect(http_status(base + "/metrics") == 401, "/metrics without a token")
        self.kubectl.run("create", "serviceaccount", SCRAPER, "-n", "default")
        self.kubectl.run("create", "serviceaccount", "stranger", "-n", "default")
        stranger = self.kubectl.token("default", "stranger")
        expect(http_status(base + "/metrics", stranger) == 403, "/metrics with an unbound account's token")
        scraper = self.kubectl.token("default", SCRAPER)
        expect(http_status(base + "/metrics", scraper) == 200, "/metrics with the reader's token")
        lease = wait_for("the leader Lease", lambda: self.kubectl.exists("lease", RELEASE, "-n", NAMESPACE))
        holder = self.kubectl.get("lease", RELEASE, "-n", NAMESPACE)["spec"].get("holderIdentity")
        # The identity is POD_NAME and a per-process suffix, as client-go's elector makes it.
        expect(lease and (holder or "").startswith(pod_name + "_"), f"Lease holder {holder!r}, Pod {pod_name!r}")

    def opt_in_and_reconcile(self) -> None:
        k = self.kubectl
        k.run("create", "namespace", "team-a")
        label = re.search(r"kubectl label namespace team-a (\S+)", self.release.notes)
        expect(label, "NOTES.txt has no label command")
        k.run("label", "namespace", "team-a", label.group(1), "--overwrite")
        k.apply(notes_heredoc(self.release.notes, 0))
        k.apply((ROOT / "examples" / "single-credential.yaml").read_text())
        k.run("wait", "-n", "team-a", "epp/outbound", "--for=condition=Ready", "--timeout=60s")
        env = proxy_env(k)
        expect(env.get("HTTPS_PROXY", {}).get("secretKeyRef", {}).get("name") == "egress-proxy-outbound",
               f"api's HTTPS_PROXY: {env.get('HTTPS_PROXY')}")
        # Policies go before the operator: its finalizer releases the workload.
        k.run("delete", "-n", "team-a", "epp/outbound", "--timeout=60s")
        expect("HTTPS_PROXY" not in proxy_env(k), "the workload was not released")


def proxy_env(k: Kubectl) -> dict:
    dep = k.get("deployment", "api", "-n", "team-a")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("valueFrom", {}) for e in container.get("env", [])}


def notes_heredoc(notes: str, index: int) -> str:
    blocks = re.findall(r"<<'YAML'\n(.*?)\n\s*YAML\n", notes, re.S)
    expect(len(blocks) > index, "NOTES.txt lacks the manifest")
    return textwrap.dedent(blocks[index])


def alive(proc: subprocess.Popen) -> bool:
    if proc.poll() is not None:
        raise CheckFailed(f"the operator exited with {proc.returncode}")
    return True


def http_status(url: str, token: str | None = None) -> int | None:
    """The status code of a GET, with a bearer token if given; None when nothing answers."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with direct.open(urllib.request.Request(url, headers=headers), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired as e:
        raise CheckFailed("the operator did not stop within 20 s of SIGTERM") from e
    expect(code == 0, f"the operator exited with {code} on SIGTERM")
