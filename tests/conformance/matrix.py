#!/usr/bin/env python3
"""Print out/observed.json as a case x client matrix.

   D = direct, E = error (nobody got a connection), U/L/S/s/A = proxy listener
   proxy_upper / proxy_lower / proxy_https / proxy_https_lower / proxy_all;
   lower-case d/e etc. never used; '!' after a letter = the engine disagreed;
   '*' = the proxy-credentials check of an `auth` case failed (see out/report.txt).
Usage: matrix.py [observed.json] [--errors]  (--errors also prints client error texts)
"""
import json
import sys
from pathlib import Path

args = [a for a in sys.argv[1:] if not a.startswith("--")]
path = Path(args[0]) if args else Path(__file__).resolve().parent / "out" / "observed.json"
data = json.loads(path.read_text())
LET = {"proxy_upper": "U", "proxy_lower": "L", "proxy_https": "S", "proxy_https_lower": "s", "proxy_all": "A"}
clients = list(data["client_versions"])
rows: dict = {}
for o in data["observations"]:
    if o["decision"] == "proxy":
        ch = "".join(LET.get(p, "?") for p in o["proxy"].split(","))
    else:
        ch = {"direct": "D", "error": "E"}[o["decision"]]
    if o.get("agree") is False:
        ch += "!"
    if o.get("hang"):
        ch += "H"
    if o.get("auth", {}).get("result") not in (None, "pass", "skipped"):
        ch += "*"
    rows.setdefault(o["case"], {})[o["client"]] = (ch, o)
abbrev = [c.replace("python-", "py-").replace("node-axios", "axios").replace("node-proxy-from-env", "pfe").replace("node-undici", "undici").replace("rust-reqwest", "reqwest") for c in clients]
w = max(len(k) for k in rows) if rows else 10
print(" " * w + " " + " ".join(f"{a:>8s}" for a in abbrev))
for case, cols in rows.items():
    print(f"{case:{w}s} " + " ".join(f"{cols.get(c, ('-',))[0]:>8s}" for c in clients))
    if "--errors" in sys.argv:
        for c in clients:
            o = cols.get(c, (None, None))[1]
            if o and o["decision"] == "error":
                print(f"{'':{w}s}   {c}: {o.get('error')}")
