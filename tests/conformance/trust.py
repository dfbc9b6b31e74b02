"""Trust conformance (issue 27): the real clients through a real TLS-intercepting proxy.

Runs inside the driver's network namespace (conformance.py --inner), as root:

* a test PKI made with the openssl CLI under .work/trust/ (keys never printed): a "corporate"
  CA (the intercepting proxy re-signs every certificate with it), a "public" test root (plays
  a root the clients already trusted: it is added to the namespace's system store, to
  certifi's bundle and to the JDK's cacerts by bind mounts that only this namespace sees, and
  it is the `--root-set` file the operator keeps), an "unrelated" CA, and an "upstream" CA
  that only the proxy trusts (so a request to the proxied origin can only succeed through
  the proxy, re-signed by the corporate CA);
* mitmproxy (mitmdump) as the intercepting proxy, and HTTPS origins (Python ssl servers);
* per dialect and client, the variables and files exactly as `egress-proxy-operator render
  trust` writes them, one client process per (client, dialect, roots, origin).
"""
from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import shutil
import socket
import ssl
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
TDIR = WORK / "trust"
JDK = "/usr/lib/jvm/java-17-openjdk-amd64"
MITM_PORT = 31290  # the intercepting proxy (127.0.0.1)
# The HTTPS origins: name -> (port, signing CA). NO_PROXY covers every one but `proxied`.
ORIGINS = {
    "proxied": (34431, "upstream"),  # reached through the proxy only; re-signed by corp
    "public": (34432, "public"),  # direct; a root the client already trusted
    "unrelated": (34433, "unrelated"),  # direct; a CA nobody trusts
    "corp": (34434, "corp"),  # direct, signed by the corporate CA (observation only)
}
DOMAIN = "trust.test"
HOSTS = [f"{o}.{DOMAIN}" for o in ORIGINS]
NO_PROXY = ",".join(f"{o}.{DOMAIN}" for o in ORIGINS if o != "proxied")
CAS = ["corp", "public", "unrelated", "upstream"]
TIMEOUT = 15.0  # per client process
WORKERS = 4  # client processes at a time (they mostly wait on TLS and process start)

# Trust dialects (the operator's names) and the clients each is checked with. A dialect's own
# client(s); `portable` and `java` carry every other dialect's variables, so every client.
JAVA_CLIENTS = ["java-urlconnection", "java-httpclient"]
NODE_DIALECTS = ["node-axios", "node-proxy-from-env", "node-undici"]
# Dialects whose clients cannot drop their own roots, so `render trust` must refuse Replace:
# node (NODE_EXTRA_CA_CERTS only adds) and curl (its compiled-in CA path /etc/ssl/certs stays,
# measured: trust/curl/replace/public passed when it was allowed); portable and java include both.
NO_REPLACE = set(NODE_DIALECTS) | {"curl", "portable", "java"}
CERT_ERROR = re.compile(
    r"certificate|CERT_|x509|X509|unknown ca|UnknownIssuer|unknown_ca|PKIX|self.signed|issuer|"
    r"verif|trust anchor|SSL_ERROR|TLS handshake|handshake",
    re.I,
)


def client_names(all_clients: list[str]) -> list[str]:
    """The conformance clients, with java as its two HTTP clients."""
    out = []
    for c in all_clients:
        out += JAVA_CLIENTS if c == "java" else [c]
    return out


def dialect_clients(dialect: str, clients: list[str]) -> list[str]:
    if dialect in ("portable", "java"):
        others = [c for c in clients if c not in JAVA_CLIENTS]
        return others + ([c for c in clients if c in JAVA_CLIENTS] if dialect == "java" else [])
    return [c for c in clients if c == dialect]


# --------------------------------------------------------------------------- PKI (openssl CLI)
def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki() -> dict[str, Path]:
    """CAs (valid 60 days: no expiry warning from render trust) and leaf certificates (2 days),
    made afresh every run under .work/trust/pki."""
    d = TDIR / "pki"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    os.chmod(d, 0o700)
    p: dict[str, Path] = {}
    for ca in CAS:
        key, crt = d / f"{ca}-ca.key", d / f"{ca}-ca.crt"
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "60",
                "-subj", f"/O=epo conformance/CN=Test {ca.capitalize()} CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        p[ca] = crt
    for name, (_port, ca) in ORIGINS.items():
        host = f"{name}.{DOMAIN}"
        key, csr, crt = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt"
        ext = d / f"{name}.ext"
        ext.write_text(f"subjectAltName=DNS:{host}\nbasicConstraints=critical,CA:FALSE\n"
                       "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
        openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={host}")
        openssl("x509", "-req", "-in", str(csr), "-CA", str(p[ca]), "-CAkey", str(d / f"{ca}-ca.key"), "-CAcreateserial",
                "-days", "2", "-sha256", "-extfile", str(ext), "-out", str(crt))
        p["leaf-" + name] = crt
        p["key-" + name] = key
    # mitmproxy's confdir: the corporate CA's key and certificate in one file
    conf = d / "mitm"
    conf.mkdir()
    (conf / "mitmproxy-ca.pem").write_text((d / "corp-ca.key").read_text() + p["corp"].read_text())
    p["mitm-conf"] = conf
    # the root set the operator keeps (--root-set): the public test root
    p["root-set"] = p["public"]
    return p


# --------------------------------------------------------------------------- system store overlay
def bind(src: Path, dst: str) -> None:
    subprocess.run(["mount", "--bind", str(src), dst], check=True)


def overlay_system_store(p: dict[str, Path]) -> list[str]:
    """Make the public test root one the clients already trust: added to /etc/ssl/certs (the
    bundle file, a hashed link, the JDK's cacerts) and to certifi's bundle, by bind mounts of
    copies. `ip netns exec` runs us in a private mount namespace (slave of the host's), so the
    host never sees them. Node's roots are compiled in: it cannot be given the test root."""
    notes = []
    certs = TDIR / "sys-certs"
    shutil.rmtree(certs, ignore_errors=True)
    shutil.copytree("/etc/ssl/certs", certs, symlinks=True)
    pem = p["public"].read_text()
    with open(certs / "ca-certificates.crt", "a") as f:
        f.write(pem)
    (certs / "epo-test-public-root.pem").write_text(pem)
    h = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", str(p["public"])], capture_output=True, text=True, check=True).stdout.strip()
    os.symlink("epo-test-public-root.pem", certs / f"{h}.0")
    cacerts = certs / "java" / "cacerts"
    if cacerts.exists():
        subprocess.run([f"{JDK}/bin/keytool", "-importcert", "-noprompt", "-alias", "epo-test-public-root", "-file",
                        str(p["public"]), "-keystore", str(cacerts), "-storepass", "changeit"], check=True, capture_output=True)
    bind(certs, "/etc/ssl/certs")
    notes.append("/etc/ssl/certs (+ca-certificates.crt, +hash link, +java/cacerts)")
    certifi = sorted((WORK / "venv" / "lib").glob("python3*/site-packages/certifi/cacert.pem"))
    for c in certifi:
        copy = TDIR / "certifi-cacert.pem"
        copy.write_text(c.read_text() + pem)
        bind(copy, str(c))
        notes.append(f"certifi {c.relative_to(WORK)}")
    return notes


# --------------------------------------------------------------------------- origins and proxy
class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = f"origin {self.server.origin_name}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


class _TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, name: str, port: int, ctx: ssl.SSLContext):
        self.origin_name = name
        self.ctx = ctx
        super().__init__(("0.0.0.0", port), _Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        sock.settimeout(5)
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        try:
            request.do_handshake()  # in the request's own thread: a failed handshake is the client's
        except (OSError, ssl.SSLError):
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address):
        pass


def start_origins(p: dict[str, Path]) -> list[_TLSServer]:
    servers = []
    for name, (port, _ca) in ORIGINS.items():
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(p["leaf-" + name], p["key-" + name])
        ctx.set_alpn_protocols(["http/1.1"])
        s = _TLSServer(name, port, ctx)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
    return servers


def wait_port(port: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_mitm(p: dict[str, Path]) -> subprocess.Popen:
    """mitmdump: re-signs every HTTPS certificate with the corporate CA, and verifies the
    origins' own certificates against the upstream CA (as a corporate proxy verifies public sites)."""
    argv = ["mitmdump", "-q", "--listen-host", "127.0.0.1", "--listen-port", str(MITM_PORT),
            "--set", f"confdir={p['mitm-conf']}", "--set", f"ssl_verify_upstream_trusted_ca={p['upstream']}",
            "--set", "connection_strategy=lazy"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=clean_env())
    if not wait_port(MITM_PORT, time.monotonic() + 30):
        proc.kill()
        raise RuntimeError(f"mitmdump did not listen on {MITM_PORT}: {proc.stderr.read().decode()[-500:]}")
    return proc


def clean_env() -> dict[str, str]:
    home = WORK / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}


# --------------------------------------------------------------------------- clients
def client_argv(client: str, url: str) -> tuple[list[str], str | None]:
    """A verifying client process for one request: argv and what to send on stdin."""
    venv_py = str(WORK / "venv" / "bin" / "python")
    job = json.dumps({"id": "trust", "url": url, "env": {}}) + "\n"
    if client == "curl":
        return ["curl", "-q", "-sS", "-f", "-o", "/dev/null", "--max-time", "5", url], None
    if client == "wget":
        # -nv, not -q: wget then says why it failed (exit 5 alone = "SSL verification failure")
        return ["wget", "-nv", "-O", "/dev/null", "--tries=1", "--timeout=5", "--max-redirect=0", url], None
    if client == "go":
        return [str(WORK / "go-probe"), "-verify", url], None
    if client == "rust-reqwest":
        tgt = Path(os.environ.get("CARGO_TARGET_DIR") or (WORK / "reqwest-target"))
        return [str(tgt / "release" / "reqwest-probe"), url], None
    if client.startswith("python-"):
        return [venv_py, str(HERE / "python" / "probe.py"), client.removeprefix("python-"), "verify"], job
    if client.startswith("node-"):
        return ["node", str(HERE / "node" / "probe.js"), client.removeprefix("node-"), "verify"], job
    if client == "ruby":
        return ["ruby", str(HERE / "ruby" / "probe.rb"), "verify"], job
    if client == "java":  # both JDK clients in one JVM: HttpURLConnection, then HttpClient
        return [f"{JDK}/bin/java", "-cp", str(WORK / "java-classes"), "Probe", url, "--httpclient", "--verify"], "go\n"
    raise ValueError(client)


def run_client(client: str, url: str, env: dict[str, str]) -> dict[str, dict]:
    """Runs one verifying request; -> {client name: {"ok", "error"}} (java: both JDK clients).
    ok = the request got the origin's 200 answer."""
    argv, stdin = client_argv("java" if client in JAVA_CLIENTS else client, url)
    try:
        p = subprocess.run(argv, input=stdin, env=env, capture_output=True, text=True, errors="replace", timeout=TIMEOUT)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return {c: {"ok": False, "error": f"HANG: killed after {TIMEOUT}s"} for c in names_of(client)}
    answers = []
    for line in out.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and "ok" in j:
            answers.append(j)
    if client in JAVA_CLIENTS:
        while len(answers) < 2:
            answers.append({"ok": False, "error": f"no answer: exit {rc}: {err.strip()[-300:]}"})
        return {c: verdict(a) for c, a in zip(JAVA_CLIENTS, answers)}
    if answers:
        return {client: verdict(answers[-1])}
    # curl, wget: the exit code and stderr
    return {client: {"ok": rc == 0, "error": None if rc == 0 else f"exit {rc}: {err.strip()[-300:]}"}}


def names_of(client: str) -> list[str]:
    return JAVA_CLIENTS if client in JAVA_CLIENTS else [client]


def verdict(a: dict) -> dict:
    ok = bool(a.get("ok")) and a.get("status") == 200
    err = a.get("error")
    if a.get("ok") and a.get("status") != 200:
        err = f"HTTP status {a.get('status')}"
    return {"ok": ok, "error": None if ok else str(err)[:500]}


def outcome(res: dict) -> str:
    """pass | cert (failed on the certificate) | other (failed for another reason)."""
    if res["ok"]:
        return "pass"
    return "cert" if CERT_ERROR.search(res["error"] or "") else "other"


def proxy_env(client: str) -> dict[str, str]:
    """The proxy variables the operator writes, with NO_PROXY covering the direct origins."""
    proxy = f"http://127.0.0.1:{MITM_PORT}"
    env = {k: proxy for k in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy")}
    env.update(NO_PROXY=NO_PROXY, no_proxy=NO_PROXY)
    if client in JAVA_CLIENTS:
        hosts = "|".join(h for h in HOSTS if not h.startswith("proxied."))
        env["JAVA_TOOL_OPTIONS"] = (f"-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={MITM_PORT} "
                                    f"-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={MITM_PORT} -Dhttp.nonProxyHosts={hosts}")
    return env


def check_env(client: str, rendered: dict[str, str]) -> dict[str, str]:
    env = clean_env() | proxy_env(client)
    for k, v in rendered.items():
        if k == "JAVA_TOOL_OPTIONS" and k in env:
            env[k] = env[k] + " " + v  # the proxy part, then the trust part
        else:
            env[k] = v
    return env


def url_of(origin: str) -> str:
    return f"https://{origin}.{DOMAIN}:{ORIGINS[origin][0]}/"


# --------------------------------------------------------------------------- render trust
def render(cmd: list[str], dialect: str, roots: str, p: dict[str, Path]) -> dict:
    """`render trust` as the operator ships it: -> {"vars", "dir", "error"} (error: it refused
    or failed; its stderr)."""
    d = TDIR / "render" / f"{dialect}-{roots}"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    argv = [*cmd, "render", "trust", "--dialect", dialect, "--ca", str(p["corp"]), "--roots", roots,
            "--root-set", str(p["root-set"]), "--dir", str(d)]
    r = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=60)
    out: dict = {"vars": {}, "dir": str(d), "error": None, "argv": " ".join(shlex.quote(a) for a in argv[len(cmd):])}
    if r.returncode != 0:
        out["error"] = f"exit {r.returncode}: {r.stderr.strip()[-400:]}"
        return out
    for line in r.stdout.splitlines():
        if "=" in line and not line.startswith("#"):
            k, v = line.split("=", 1)
            out["vars"][k.strip()] = v
    if not out["vars"]:
        out["error"] = f"no NAME=VALUE line in its output: {r.stdout[:200]!r}"
    return out


# Expected outcome per (roots, origin): True = the request must succeed.
EXPECT = {
    ("keep", "proxied"): True,
    ("keep", "public"): True,
    ("keep", "unrelated"): False,
    ("replace", "proxied"): True,
    ("replace", "public"): False,
    ("replace", "unrelated"): False,
}


def plan(dialects: list[str], clients: list[str]) -> list[tuple[str, str, str]]:
    """(dialect, roots, client) triples to check; client None = the refusal check."""
    out = []
    for d in dialects:
        cs = dialect_clients(d, clients)
        if not cs:
            continue
        for roots in ("keep", "replace"):
            if roots == "replace" and d in NO_REPLACE:
                out.append((d, roots, None))
                continue
            # java: one JVM answers for both JDK clients
            runs = [c for c in cs if c not in JAVA_CLIENTS] + ([JAVA_CLIENTS[0]] if set(cs) & set(JAVA_CLIENTS) else [])
            out += [(d, roots, c) for c in runs]
    return out


def run_checks(cmd: list[str], dialects: list[str], clients: list[str], p: dict[str, Path]) -> list[dict]:
    triples = plan(dialects, clients)
    renders = {(d, r): render(cmd, d, r, p) for d, r in sorted({(d, r) for d, r, _ in triples})}
    results: list[dict] = []
    jobs = []
    for d, roots, c in triples:
        rd = renders[(d, roots)]
        if c is None:
            refused = rd["error"] is not None
            results.append({"id": f"trust/{d}/replace/refused", "dialect": d, "roots": roots, "client": "(render)",
                            "origin": "-", "expect": "refused", "observed": "refused" if refused else "accepted",
                            "error": rd["error"], "vars": rd["vars"],
                            "result": "agree" if refused else "false-trust"})
            continue
        for origin in ("proxied", "public", "unrelated"):
            jobs.append((d, roots, c, origin, rd))
    with ThreadPoolExecutor(WORKERS) as ex:
        for recs in ex.map(lambda j: one_check(*j), jobs):
            results += recs
    return [r for r in results if r["client"] in clients or r["client"] == "(render)"]


def one_check(d: str, roots: str, c: str, origin: str, rd: dict) -> list[dict]:
    expect = EXPECT[(roots, origin)]
    base = {"dialect": d, "roots": roots, "origin": origin, "expect": "pass" if expect else "fail", "vars": rd["vars"]}
    if rd["error"] is not None:
        return [base | {"id": f"trust/{d}/{roots}/{origin}", "client": n, "observed": "render-error",
                        "error": rd["error"], "result": "other"} for n in names_of(c)]
    out = []
    env = check_env(c, rd["vars"])
    for name, res in run_client(c, url_of(origin), env).items():
        obs = outcome(res)
        if obs == "pass":
            result = "agree" if expect else "false-trust"
        elif expect:
            result = "false-distrust"
        else:
            result = "agree" if obs == "cert" else "other"
        out.append(base | {"id": f"trust/{d}/{roots}/{origin}", "client": name, "observed": obs,
                           "error": res["error"], "result": result})
    return out


def table(results: list[dict]) -> list[str]:
    """Per client and dialect: checks, agree, false trust, false distrust, other."""
    lines = [f"{'client':20s} {'dialect':20s} {'checks':>6s} {'agree':>6s} {'false-trust':>11s} {'false-distrust':>14s} {'other':>5s}"]
    keys = []
    for r in results:
        if (r["client"], r["dialect"]) not in keys:
            keys.append((r["client"], r["dialect"]))
    for c, d in keys:
        rs = [r for r in results if r["client"] == c and r["dialect"] == d]
        n = lambda k: sum(1 for r in rs if r["result"] == k)  # noqa: E731
        lines.append(f"{c:20s} {d:20s} {len(rs):6d} {n('agree'):6d} {n('false-trust'):11d} {n('false-distrust'):14d} {n('other'):5d}")
    return lines


def summary(results: list[dict]) -> str:
    n = lambda k: sum(1 for r in results if r["result"] == k)  # noqa: E731
    other = f", {n('other')} other failures" if n("other") else ""
    return (f"trust: {n('agree')}/{len(results)} checks agree ({n('false-trust')} false trust, "
            f"{n('false-distrust')} false distrust{other})")


def failures(results: list[dict]) -> list[str]:
    out = []
    for r in results:
        if r["result"] == "agree":
            continue
        shown = " ".join(f"{k}={v}" for k, v in r["vars"].items()) or "(no variable)"
        out.append(f"[trust {r['client']}] {r['id']}: {r['result'].upper()}: expected {r['expect']}, observed "
                   f"{r['observed']}\n    rendered: {shown}\n    error: {r['error']}")
    return out


# --------------------------------------------------------------------------- observation
def observe_files(p: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Candidate variables, each pointing at something holding ONLY the corporate CA."""
    d = TDIR / "observe"
    shutil.rmtree(d, ignore_errors=True)
    (d / "hashed").mkdir(parents=True)
    bundle = d / "ca-bundle.crt"
    shutil.copy(p["corp"], bundle)
    shutil.copy(p["corp"], d / "hashed" / "corp.pem")
    subprocess.run(["openssl", "rehash", str(d / "hashed")], check=True, capture_output=True)
    (d / "wgetrc").write_text(f"ca_certificate = {bundle}\n")
    p12 = d / "truststore.p12"
    subprocess.run([f"{JDK}/bin/keytool", "-J-Dkeystore.pkcs12.certProtectionAlgorithm=NONE",
                    "-J-Dkeystore.pkcs12.macAlgorithm=NONE", "-importcert", "-noprompt", "-alias", "corp", "-file",
                    str(p["corp"]), "-keystore", str(p12), "-storetype", "PKCS12", "-storepass", "changeit"],
                   check=True, capture_output=True)
    f = str(bundle)
    return {
        "(none)": {},
        "SSL_CERT_FILE": {"SSL_CERT_FILE": f},
        "SSL_CERT_DIR (hashed)": {"SSL_CERT_DIR": str(d / "hashed")},
        "SSL_CERT_FILE+SSL_CERT_DIR": {"SSL_CERT_FILE": f, "SSL_CERT_DIR": str(d)},
        "CURL_CA_BUNDLE": {"CURL_CA_BUNDLE": f},
        "REQUESTS_CA_BUNDLE": {"REQUESTS_CA_BUNDLE": f},
        "NODE_EXTRA_CA_CERTS": {"NODE_EXTRA_CA_CERTS": f},
        "WGETRC": {"WGETRC": str(d / "wgetrc")},
        "JAVA_TOOL_OPTIONS": {"JAVA_TOOL_OPTIONS": f"-Djavax.net.ssl.trustStore={p12} -Djavax.net.ssl.trustStoreType=PKCS12"},
    }


def observe(clients: list[str], p: dict[str, Path]) -> tuple[list[dict], list[str]]:
    """Which CA variable each client reads and whether it replaces or adds: for each candidate
    (pointing at the corporate CA alone) a direct request to `corp` (read?) and to `public` (a
    root of the client's default store: kept = adds, lost = replaces). No proxy."""
    cands = observe_files(p)
    runs = [c for c in clients if c not in JAVA_CLIENTS] + ([JAVA_CLIENTS[0]] if set(clients) & set(JAVA_CLIENTS) else [])
    jobs = [(c, v, o) for c in runs for v in cands for o in ("corp", "public")]

    def go(j):
        c, v, o = j
        return [(n, v, o, outcome(r), r["error"]) for n, r in run_client(c, url_of(o), clean_env() | cands[v]).items()]

    with ThreadPoolExecutor(WORKERS) as ex:
        flat = [x for xs in ex.map(go, jobs) for x in xs]
    obs = [{"client": n, "variable": v, "origin": o, "observed": r, "error": e} for n, v, o, r, e in flat]
    return obs, observe_table(clients, list(cands), obs)


def observe_table(clients: list[str], cands: list[str], obs: list[dict]) -> list[str]:
    """One row per client: baseline (is the test public root in its default store?), then per
    variable: `-` not read, `adds`, `replaces` (`?` when a request failed for another reason)."""
    get = {(o["client"], o["variable"], o["origin"]): o["observed"] for o in obs}
    head = ["default store"] + [v for v in cands if v != "(none)"]
    lines = ["  ".join([f"{'client':19s}"] + [f"{h:>{max(len(h), 8)}s}" for h in head])]
    for c in clients:
        if (c, "(none)", "public") not in get:
            continue
        cells = []
        base_pub, base_corp = get[(c, "(none)", "public")], get[(c, "(none)", "corp")]
        cells.append({"pass": "has root", "cert": "lacks root"}.get(base_pub, "?") + ("" if base_corp == "cert" else "!"))
        for v in head[1:]:
            corp, pub = get[(c, v, "corp")], get[(c, v, "public")]
            if "other" in (corp, pub):
                cell = "?"
            elif corp != "pass":
                cell = "-"
            elif base_pub != "pass":
                cell = "read"  # cannot tell adds from replaces: the default store lacks the test root
            else:
                cell = "adds" if pub == "pass" else "replaces"
            cells.append(cell)
        lines.append("  ".join([f"{c:19s}"] + [f"{x:>{max(len(h), 8)}s}" for x, h in zip(cells, head)]))
    return lines


# --------------------------------------------------------------------------- entry
class Setup:
    """PKI, system store overlay, origins, intercepting proxy; stop() ends what it started."""

    def __init__(self):
        t0 = time.monotonic()
        self.pki = make_pki()
        self.overlay = overlay_system_store(self.pki)
        self.origins = start_origins(self.pki)
        self.mitm = start_mitm(self.pki)
        self.elapsed = time.monotonic() - t0

    def stop(self):
        for s in self.origins:
            s.shutdown()
            s.server_close()
        if self.mitm.poll() is None:
            self.mitm.terminate()
            try:
                self.mitm.wait(5)
            except subprocess.TimeoutExpired:
                self.mitm.kill()


def mitm_version() -> str:
    r = subprocess.run(["mitmdump", "--version"], capture_output=True, text=True, env=clean_env())
    return (r.stdout.splitlines() or ["?"])[0]
