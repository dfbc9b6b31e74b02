"""The Helm chart's tests (run by scripts/chart-test.sh): rendered offline, then released with
real Helm against kube-sim. Usage: run.py --bin-dir DIR | run.py --write-rbac"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import cluster
import lifecycle
import render
from common import CHART, RESULTS, ROOT, check


def cluster_checks(bin_dir: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="chart-test-") as tmp:
        workdir = Path(tmp)
        sim = cluster.KubeSim(bin_dir / "kube-sim", workdir, ROOT / "operator" / "demo" / "cluster.yaml")
        try:
            kubectl = cluster.Kubectl(sim.kubeconfig)
            release = lifecycle.Release(kubectl, cluster.free_port(), bin_dir / "egress-proxy-operator", workdir)
            steps = [
                ("install", release.install),
                ("operator_runs_with_the_installed_args", release.operator),
                ("upgrade_with_a_changed_value", release.upgrade),
                ("rollback_reverts_it", release.rollback),
                ("uninstall_keeps_only_the_crd", release.uninstall),
            ]
            # Every later step needs the installed release; each leaves it installed.
            if not check(*steps[0]):
                for later, _ in steps[1:]:
                    RESULTS["failed"] += 1
                    print(f"FAIL {later}: not run, install failed")
                return
            for name, fn in steps[1:]:
                check(name, fn)
            # The CRD the first release left behind (Helm keeps CRDs): the next release's.
            check("install_upgrade_uninstall_over_an_earlier_releases_crd", release.cycle_over_crd)
        finally:
            sim.stop()


def crd_routes(bin_dir: Path) -> None:
    """A release over the chart's CRD applied beforehand, on a cluster of its own per route."""
    facts = ROOT / "operator" / "demo" / "cluster.yaml"
    for route in ("kubectl-server-side", "kubectl-create", "kube-sim-load"):
        with tempfile.TemporaryDirectory(prefix="chart-crd-") as tmp:
            workdir = Path(tmp)
            load = [facts, CHART / "crds"] if route == "kube-sim-load" else [facts]
            sim = cluster.KubeSim(bin_dir / "kube-sim", workdir, *load)
            try:
                kubectl = cluster.Kubectl(sim.kubeconfig)
                release = lifecycle.Release(kubectl, cluster.free_port(), bin_dir / "egress-proxy-operator", workdir)
                steps = lambda: (lifecycle.pre_apply_crd(kubectl, route), release.cycle_over_crd())
                check(f"install_upgrade_uninstall_over_a_crd_from_{route.replace('-', '_')}", steps)
            finally:
                sim.stop()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", type=Path, help="where kube-sim and egress-proxy-operator are")
    parser.add_argument("--write-rbac", action="store_true", help="regenerate deploy/rbac.yaml")
    args = parser.parse_args()
    if args.write_rbac:
        render.write_rbac()
        return 0
    if not args.bin_dir:
        parser.error("--bin-dir is required")
    started = time.monotonic()
    render.run_all()
    cluster_checks(args.bin_dir)
    crd_routes(args.bin_dir)
    print(f"chart tests: {time.monotonic() - started:.0f} s")
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
