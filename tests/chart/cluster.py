"""kube-sim and kubectl for the chart tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

from common import CheckFailed, wait_for


class KubeSim:
    """The project's kube-sim binary on a free port, with the simulated controllers and what
    `load` holds: the cluster facts (nodes, networks, DNS domain) for the operator's discovery,
    and anything else loaded before the test starts."""

    def __init__(self, binary: Path, workdir: Path, *load: Path):
        self.kubeconfig = workdir / "admin.kubeconfig"
        self.log = open(workdir / "kube-sim.log", "wb")
        loads = [a for path in load for a in ("--load", str(path))]
        self.proc = subprocess.Popen(
            [str(binary), "--kubeconfig", str(self.kubeconfig), "--controllers", *loads],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for("kube-sim's kubeconfig", self._ready, timeout=60)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise CheckFailed(f"kube-sim exited with {self.proc.returncode}")
        return self.kubeconfig.exists()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class Kubectl:
    def __init__(self, kubeconfig: Path):
        self.kubeconfig = kubeconfig

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise CheckFailed(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def get(self, *args: str) -> dict:
        return json.loads(self.run("get", *args, "-o", "json").stdout)

    def exists(self, *args: str) -> bool:
        proc = self.run("get", *args, "--ignore-not-found", "-o", "name", check=False)
        if proc.returncode != 0:
            raise CheckFailed(f"kubectl get {' '.join(args)}: {proc.stderr.strip()}")
        return bool(proc.stdout.strip())

    def apply(self, manifest: str) -> None:
        self.run("apply", "-f", "-", stdin=manifest)

    def token(self, namespace: str, account: str) -> str:
        """A TokenRequest token; returned, never printed."""
        return self.run("create", "token", account, "-n", namespace).stdout.strip()


def server_of(kubeconfig: Path) -> str:
    for line in kubeconfig.read_text().splitlines():
        if line.strip().startswith("server:"):
            return line.split("server:", 1)[1].strip()
    raise CheckFailed("no server in the kubeconfig")


def token_kubeconfig(path: Path, server: str, token: str) -> Path:
    """A kubeconfig for one ServiceAccount token, readable by its owner only."""
    path.touch(mode=0o600)
    path.write_text(
        json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "operator",
            "clusters": [{"name": "sim", "cluster": {"server": server}}],
            "users": [{"name": "operator", "user": {"token": token}}],
            "contexts": [{"name": "operator", "context": {"cluster": "sim", "user": "operator"}}],
        })
    )
    os.chmod(path, 0o600)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
