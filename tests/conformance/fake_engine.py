#!/usr/bin/env python3
"""A stand-in for `egress-proxy-operator` used to prove the harness can fail.

`explain` answers what the real clients were observed to do (out/observed.json, written by
an earlier run), so a run against it must pass; `--flip SUBSTRING` turns the answer for
every case whose id contains SUBSTRING upside down (direct <-> proxy), and `--wrong-proxy
SUBSTRING` keeps the decision but names another proxy, so a run must fail on exactly those.
`render-no-proxy` echoes the entries joined with commas.

  conformance.py --engine "python3 tests/conformance/fake_engine.py --flip sanity-star" --case sanity
"""
import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import conformance  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--observed", default=str(HERE / "out" / "observed.json"))
ap.add_argument("--flip", action="append", default=[])
ap.add_argument("--wrong-proxy", action="append", default=[])
ap.add_argument("cmd")
ap.add_argument("--dialect")
ap.add_argument("--output")
ap.add_argument("--env", action="append", default=[])
ap.add_argument("rest", nargs="*")
a = ap.parse_intermixed_args()

if a.cmd == "render-no-proxy":
    print(json.dumps({"value": ",".join(a.rest), "uncovered": [], "warnings": []}))
    sys.exit(0)

url = a.rest[-1]
env = dict(e.split("=", 1) for e in a.env)
data = json.loads(Path(a.observed).read_text())
out = []
for o in data["observations"]:
    if o["url"] != url or {k: conformance.subst(v) for k, v in o["env"].items()} != env:
        continue
    d, proxy = o["decision"], o["proxy_addr"]
    if any(s in o["case"] for s in a.flip):
        d, proxy = ("direct", None) if d == "proxy" else ("proxy", "127.0.0.1:31281")
    if any(s in o["case"] for s in a.wrong_proxy) and d == "proxy":
        proxy = "127.0.0.1:31285" if proxy != "127.0.0.1:31285" else "127.0.0.1:31281"
    out.append({"dialect": o["client"], "url": url, "decision": d,
                "proxy": f"http://{proxy}" if proxy else None, "matched": None, "variable": None,
                "reason": "replayed from observed.json"})
print(json.dumps(out))
