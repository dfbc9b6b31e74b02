"""Python client probe for the NO_PROXY conformance harness.

Usage: probe.py urllib|requests|httpx [verify]   (jobs as JSON lines on stdin)
Each job is {"id","url","env":{...}}. The process starts with no proxy variables;
before each job the variables of the previous job are removed and the job's set,
then one real request is made with the library's defaults (proxies from the
environment). One JSON line per job is written: {"id","ok","status","error"}.
Certificates are not checked, except with `verify` (the trust checks): then each library
verifies with its defaults (its own default CA store and the variables it reads).
"""
import json
import os
import ssl
import sys

MODE = sys.argv[1]
VERIFY = sys.argv[2:] == ["verify"]
TIMEOUT = 3

if MODE == "requests":
    import requests
    import urllib3

    urllib3.disable_warnings()
    VERSION = requests.__version__
elif MODE == "httpx":
    import httpx

    VERSION = httpx.__version__
elif MODE == "urllib":
    import urllib.request

    VERSION = sys.version.split()[0]
else:
    sys.exit(f"unknown mode {MODE}")


_CTX = None


def one(url):
    global _CTX
    if VERIFY:
        return one_verified(url)
    if MODE == "urllib":
        if _CTX is None:
            _CTX = ssl.create_default_context()
            _CTX.check_hostname = False
            _CTX.verify_mode = ssl.CERT_NONE
        ctx = _CTX
        # What urlopen() does on first use: build_opener() creates a ProxyHandler
        # that reads the environment at construction (a fresh one per case).
        opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ctx))
        with opener.open(url, timeout=TIMEOUT) as r:
            return r.status
    if MODE == "requests":
        r = requests.get(url, timeout=TIMEOUT, verify=False, allow_redirects=False)
        return r.status_code
    # httpx reads the environment when the Client is created: one Client per case.
    with httpx.Client(timeout=TIMEOUT, verify=False) as c:
        return c.get(url).status_code


def one_verified(url):
    """The library's defaults: urlopen's context, requests' and httpx' verify=True."""
    if MODE == "urllib":
        with urllib.request.build_opener().open(url, timeout=TIMEOUT) as r:
            return r.status
    if MODE == "requests":
        return requests.get(url, timeout=TIMEOUT, allow_redirects=False).status_code
    with httpx.Client(timeout=TIMEOUT) as c:
        return c.get(url).status_code


def main():
    prev = []
    print(json.dumps({"version": VERSION}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        for k in prev:
            os.environ.pop(k, None)
        for k, v in job["env"].items():
            os.environ[k] = v
        prev = list(job["env"])
        out = {"id": job["id"], "ok": False, "status": None, "error": None}
        try:
            out["status"] = one(job["url"])
            out["ok"] = True
        except Exception as e:  # noqa: BLE001 - every failure is an observation
            out["error"] = f"{type(e).__name__}: {e}"[:500]
        print(json.dumps(out), flush=True)


main()
