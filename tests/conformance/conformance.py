#!/usr/bin/env python3
"""NO_PROXY conformance driver: runs the case table through the REAL HTTP clients and
compares what they did with `egress-proxy-operator explain` / `render-no-proxy`.

Isolation: everything (listeners, clients, engine) runs inside a fresh network
namespace in which EVERY address (0.0.0.0/0 and ::/0) is routed to `lo`, so no packet
leaves the machine. Host names resolve through a namespace-only /etc/hosts.

The outer process (root) creates the namespace and its /etc/netns files, re-executes
itself inside it with --inner, and removes everything afterwards.

Stdlib only (Python >= 3.11 for tomllib).
"""
from __future__ import annotations

import argparse
import base64
import ipaddress
import json
import os
import re
import selectors
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.parse
from pathlib import Path

import trust

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
OUT = HERE / "out"

# Proxy listeners (127.0.0.1) -> port. Case URLs must not use these ports.
PROXIES = {
    "proxy_upper": 31281,
    "proxy_lower": 31282,
    "proxy_https": 31283,
    "proxy_https_lower": 31284,
    "proxy_all": 31285,
}
PORT_TO_PROXY = {p: n for n, p in PROXIES.items()}

CLIENTS = [
    "curl",
    "wget",
    "go",
    "python-urllib",
    "python-requests",
    "python-httpx",
    "node-axios",
    "node-proxy-from-env",
    "node-undici",
    "ruby",
    "rust-reqwest",
    "java",
]
# The JDK reads no proxy variable: only JAVA_TOOL_OPTIONS (-D system properties) reaches it.
JAVA_CLIENT = "java"
JAVA_TOOL_OPTIONS = "JAVA_TOOL_OPTIONS"
# Debian's OpenJDK 17 (the version the `java` dialect models), not any other JDK on PATH.
JAVA = "/usr/lib/jvm/java-17-openjdk-amd64/bin/java"
JAVA_CLASSES = WORK / "java-classes"  # java/Probe.java compiled by run.sh

SECRET = "s3cr3t-Pw"  # password in {proxy_upper_auth}; must never appear in engine output
CLIENT_TIMEOUT = 10.0  # seconds a client may take for one case before it is killed

# Proxy credentials with a percent-encoded user-info (issue 31): the operator percent-encodes
# every user-info byte outside RFC 3986 unreserved. A client that DECODES user and password
# before it sends `Proxy-Authorization: Basic base64(user:pw)` gets the real password; one
# that sends them as written does not (see AUTH_MODEL below).
# {proxy_auth_NAME} is proxy_upper with NAME's user:password as written below; a case with
# `auth = "NAME"` checks the header the proxy listener got against what AUTH_MODEL says
# the client sends: the decoded pair, or the pair as written.
# name: (user as written, password as written, "user:password" decoded)
AUTH_CREDS = {
    # no encoding at all: does the client send Proxy-Authorization from the variable?
    "plain": ("svc", "plain-Pw0", "svc:plain-Pw0"),
    # shell metacharacters (sub-delims) of the issue: $ ( ) ' ! ; &
    "shell": ("svc", "x%24%28touch%24IFS%27PWNED%27%29%21%3B%26", "svc:x$(touch$IFS'PWNED')!;&"),
    # gen-delims that split a URL (@ : / ? #), a literal % and a space
    "delims": ("svc", "p%40ss%3Aw0rd%2F%3F%23%25%20z", "svc:p@ss:w0rd/?#% z"),
    # encoded unreserved characters (upper- and lower-case hex) in the user name
    "unreserved": ("svc%2Eops%7e1", "Pw%2D%5F0%2A", "svc.ops~1:Pw-_0*"),
}
for _n, (_u, _p, _d) in AUTH_CREDS.items():
    assert urllib.parse.unquote(_u) + ":" + urllib.parse.unquote(_p) == _d, _n
# Must never appear in the engine's output: every password as written and decoded.
SECRETS = [SECRET] + [x for _u, pw, dec in AUTH_CREDS.values() for x in (pw, dec.split(":", 1)[1])]
# Clients whose Proxy-Authorization is not theirs to check (the auth check is skipped):
AUTH_SKIP = {
    "java": "the JDK takes no proxy credentials from any variable (only an Authenticator set in code)",
    "node-proxy-from-env": "proxy-from-env only returns the proxy URL; the header is built by the probe"
    " (decodeURIComponent, as https-proxy-agent does), so it proves nothing about a client",
}
# What each checked client does with a percent-encoded user-info in the proxy URL (observed
# with the versions of README.md). The auth check expects exactly this: a client that departs
# from its entry (say an axios that starts decoding) fails the run, and then this table, the
# README section "Proxy credentials" and what users are told about that client must change.
AUTH_DECODES = "decodes"  # sends Basic base64(decoded user ":" decoded password)
AUTH_AS_WRITTEN = "sends-as-written"  # sends Basic base64(user ":" password as in the URL)
AUTH_MODEL = {
    "curl": AUTH_DECODES,
    "wget": AUTH_DECODES,
    "go": AUTH_DECODES,
    "python-urllib": AUTH_DECODES,
    "python-requests": AUTH_DECODES,
    "python-httpx": AUTH_DECODES,
    # axios 1.21.1, lib/adapters/http.js setProxy: `proxy = new URL(proxyUrl)`, then
    # `proxyAuth = proxyUsername + ':' + proxyPassword` from the WHATWG URL's `username` /
    # `password`, which stay percent-encoded; same header for the GET and the CONNECT.
    # axios PR #5772 ("fix(http): decode proxy url auth") would decode them; not merged.
    "node-axios": AUTH_AS_WRITTEN,
    "node-undici": AUTH_DECODES,
    "ruby": AUTH_DECODES,
    "rust-reqwest": AUTH_DECODES,
}
assert set(AUTH_MODEL).isdisjoint(AUTH_SKIP) and set(AUTH_MODEL) | set(AUTH_SKIP) == set(CLIENTS)


# --------------------------------------------------------------------------- cases
def placeholders() -> dict[str, str]:
    d = {name: f"http://127.0.0.1:{port}" for name, port in PROXIES.items()}
    d["proxy_upper_noscheme"] = f"127.0.0.1:{PROXIES['proxy_upper']}"
    # bare port numbers, for JAVA_TOOL_OPTIONS (-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port_upper})
    for name, port in PROXIES.items():
        d["port_" + name.removeprefix("proxy_")] = str(port)
    # same listener as proxy_upper, with credentials the engine must never print
    d["proxy_upper_auth"] = f"http://user:{SECRET}@127.0.0.1:{PROXIES['proxy_upper']}"
    for name, (user, pw, _dec) in AUTH_CREDS.items():
        d["proxy_auth_" + name] = f"http://{user}:{pw}@127.0.0.1:{PROXIES['proxy_upper']}"
    return d


def subst(value: str) -> str:
    for k, v in placeholders().items():
        value = value.replace("{" + k + "}", v)
    return value


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for p in pairs:
        if "=" not in p:
            raise SystemExit(f"cases.toml: env entry without '=': {p!r}")
        k, v = p.split("=", 1)
        env[k] = v
    return env


BOTH_PROXIES = [
    "HTTP_PROXY={proxy_upper}",
    "http_proxy={proxy_upper}",
    "HTTPS_PROXY={proxy_https}",
    "https_proxy={proxy_https}",
]


def load_table(path: Path) -> tuple[list[dict], list[dict]]:
    data = tomllib.loads(path.read_text())
    cases: list[dict] = []
    for c in data.get("case", []):
        cases.append(
            {
                "id": c["id"],
                "url": c["url"],
                "env_template": parse_env(c.get("env", [])),
                "note": c.get("note"),
                "expect": c.get("expect"),
                "auth": c.get("auth"),
            }
        )
    for g in data.get("group", []):
        base: list[str] = []
        if g.get("proxies", "both") == "both":
            base += BOTH_PROXIES
        if "no_proxy" in g:
            base += [f"NO_PROXY={g['no_proxy']}", f"no_proxy={g['no_proxy']}"]
        base += g.get("env", [])
        for u in g["urls"]:
            cases.append(
                {
                    "id": f"{g['id']}/{u}",
                    "url": u,
                    "env_template": parse_env(base),
                    "note": g.get("note"),
                    "expect": g.get("expect"),
                    "auth": g.get("auth"),
                }
            )
    seen = set()
    for c in cases:
        if c["expect"] not in (None, "direct", "proxy", "error"):
            raise SystemExit(f"cases.toml: {c['id']}: expect must be direct, proxy or error")
        if c["auth"] is not None and c["auth"] not in AUTH_CREDS:
            raise SystemExit(f"cases.toml: {c['id']}: auth must be one of {', '.join(AUTH_CREDS)}")
        if c["id"] in seen:
            raise SystemExit(f"cases.toml: duplicate case id {c['id']}")
        seen.add(c["id"])
        c["env"] = {k: subst(v) for k, v in c["env_template"].items()}
    renders = data.get("render", [])
    return cases, renders


def url_host_port(url: str) -> tuple[str, int]:
    u = urllib.parse.urlsplit(url)
    host = u.hostname or ""
    port = u.port or (443 if u.scheme == "https" else 80)
    return host, port


# --------------------------------------------------------------------------- listeners
class Server:
    """Direct listeners (0.0.0.0 and :: on the URL ports) and proxy listeners (127.0.0.1).

    Every accepted connection is recorded with a global sequence number; the driver runs
    one client request at a time and attributes the connections accepted in between."""

    def __init__(self, direct_ports: set[int]):
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.records: list[dict] = []
        self.listeners: list[socket.socket] = []
        self.drain_req: list[threading.Event] = []
        self.stop = False
        # Set by the driver while an `auth` case runs: a proxy-form request without
        # Proxy-Authorization then gets `407` + `Proxy-Authenticate: Basic`, so a client
        # that sends credentials only when challenged is still seen sending them.
        self.challenge = False
        for name, port in PROXIES.items():
            self._listen(socket.AF_INET, "127.0.0.1", port, ("proxy", name))
        for port in sorted(direct_ports):
            self._listen(socket.AF_INET, "0.0.0.0", port, ("direct", None))
            self._listen(socket.AF_INET6, "::", port, ("direct", None))
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _listen(self, fam, addr, port, tag):
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((addr, port))
        s.listen(128)
        s.setblocking(False)
        self.listeners.append(s)
        self.sel.register(s, selectors.EVENT_READ, ("listen", tag, port))

    def mark(self) -> int:
        with self.lock:
            return len(self.records)

    def since(self, mark: int) -> list[dict]:
        ev = threading.Event()
        with self.lock:
            self.drain_req.append(ev)
        ev.wait(5)
        time.sleep(0.005)  # let a just-accepted connection's first bytes be read
        with self.lock:
            return [dict(r) for r in self.records[mark:]]

    def _accept_all(self, lsock, tag, port):
        while True:
            try:
                conn, peer = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            local = conn.getsockname()
            rec = {
                "kind": tag[0],
                "proxy": tag[1],
                "local": f"[{local[0]}]:{local[1]}" if ":" in local[0] else f"{local[0]}:{local[1]}",
                "first_line": None,
                "tls": False,
                "proxy_auth": [],  # every Proxy-Authorization value of the request, as received
            }
            with self.lock:
                self.records.append(rec)
            conn.setblocking(False)
            self.sel.register(conn, selectors.EVENT_READ, ("conn", rec, bytearray(), time.monotonic()))

    def _close(self, conn):
        try:
            self.sel.unregister(conn)
        except Exception:
            pass
        try:
            conn.close()
        except OSError:
            pass

    def _answer(self, conn, data: bytes):
        try:
            conn.setblocking(True)
            conn.settimeout(1)
            conn.sendall(data)
        except OSError:
            pass
        self._close(conn)

    def _loop(self):
        while not self.stop:
            for key, _ in self.sel.select(0.01):
                kind = key.data[0]
                if kind == "listen":
                    self._accept_all(key.fileobj, key.data[1], key.data[2])
                    continue
                _, rec, buf, _t0 = key.data
                conn = key.fileobj
                try:
                    chunk = conn.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    self._close(conn)
                    continue
                buf += chunk
                if buf[:1] == b"\x16":
                    rec["tls"] = True
                    rec["first_line"] = "<TLS ClientHello>"
                    self._close(conn)
                    continue
                if rec["kind"] == "proxy" and buf[:1] in (b"\x04", b"\x05"):
                    # a SOCKS greeting (the JDK's socksProxyHost): recorded, closed at once so
                    # the client fails fast instead of waiting for a SOCKS reply
                    rec["first_line"] = f"<SOCKS{buf[0]} greeting>"
                    self._close(conn)
                    continue
                if b"\r\n\r\n" in buf or len(buf) > 60000:
                    line = bytes(buf.split(b"\r\n", 1)[0]).decode("latin-1")[:300]
                    rec["first_line"] = line
                    rec["proxy_auth"] = header_values(bytes(buf), "proxy-authorization")
                    if self.challenge and PROXY_FORM.match(line) and not rec["proxy_auth"]:
                        rec["challenged"] = True
                        self._answer(
                            conn,
                            b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                            b'Proxy-Authenticate: Basic realm="conformance"\r\n'
                            b"Content-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                    elif rec["kind"] == "proxy" and line.upper().startswith("CONNECT "):
                        self._answer(conn, b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    else:
                        body = b"proxied" if rec["kind"] == "proxy" else b"direct"
                        self._answer(
                            conn,
                            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                            % (len(body), body),
                        )
            # close connections that idle too long
            now = time.monotonic()
            for key in list(self.sel.get_map().values()):
                if key.data[0] == "conn" and now - key.data[3] > 5:
                    self._close(key.fileobj)
            with self.lock:
                reqs, self.drain_req = self.drain_req, []
            if reqs:
                for key in list(self.sel.get_map().values()):
                    if key.data[0] == "listen":
                        self._accept_all(key.fileobj, key.data[1], key.data[2])
                for ev in reqs:
                    ev.set()


def header_values(head: bytes, name: str) -> list[str]:
    """The values of every header `name` (lower case) in a request head, as received."""
    block = head.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    out = []
    for line in block.split("\r\n")[1:]:
        k, sep, v = line.partition(":")
        if sep and k.strip().lower() == name:
            out.append(v.strip())
    return out


def decide(client: str, res: dict) -> tuple[str, str | None, str | None]:
    """The decision a client made, from the connections the listeners saw."""
    decision, proxy = classify(res["connections"])
    err = str(res.get("error"))
    if (
        decision == "error"
        and client == "ruby"
        and "net_http_proxy" in res
        and res.get("net_http_proxy") is None
        and "Failed to open TCP connection to" in err
        and "Network is unreachable" in err
    ):
        # Net::HTTP decided to go direct (proxy? false) and tried; the kernel refused that
        # address form inside the namespace (seen with IPv4-mapped IPv6 literals).
        return "direct", None, "Net::HTTP chose direct (proxy? false) but the direct connect failed: " + err
    return decision, proxy, None


# A request in proxy form: CONNECT, or an absolute URI (`GET http://host/ HTTP/1.1`). A client
# sends it only to what it takes for a proxy; a plain request to a server has `GET /path`.
PROXY_FORM = re.compile(r"^(CONNECT \S+ HTTP/|[A-Z]+ [A-Za-z][A-Za-z0-9+.-]*://)")
OTHER = "other@"  # a proxy that is none of the proxy listeners: "other@127.0.0.1:443"


def classify(recs: list[dict]) -> tuple[str, str | None]:
    # A direct listener that got a request in proxy form was used as a proxy: the client's
    # proxy is that host:port (e.g. the JDK's default proxy port 80 / 443 on 127.0.0.1,
    # where no proxy listener can be, as the direct listeners hold those ports).
    stray = {OTHER + r["local"] for r in recs if r["kind"] == "direct" and PROXY_FORM.match(r["first_line"] or "")}
    proxies = sorted({r["proxy"] for r in recs if r["kind"] == "proxy"} | stray)
    if proxies:
        return "proxy", ",".join(proxies)
    if any(r["kind"] == "direct" for r in recs):
        return "direct", None
    return "error", None


def basic_credentials(value: str) -> str:
    """`Basic <base64>` -> the decoded `user:password` (bytes shown as UTF-8); any other
    scheme or bad base64 -> the value as received, in angle brackets."""
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "basic":
        return f"<{value}>"
    try:
        return base64.b64decode(token.strip(), validate=True).decode("utf-8", "backslashreplace")
    except ValueError:
        return f"<{value}>"


def check_auth(client: str, url: str, cred: str, recs: list[dict]) -> dict:
    """The proxy-credentials check of one (case, client): every request the client sent in
    proxy form must carry `Proxy-Authorization: Basic base64(user:password)`, decoded or as
    written as AUTH_MODEL says for the client.
    result: pass | skipped | raw (sent the percent-encoded text as is, model: decodes)
    | decoded (sent the decoded pair, model: sends-as-written) | none (no header)
    | other (another value) | no-proxy (the client never used the proxy).
    `departs` is set when the client did the other of the two things: the model must change."""
    user, pw, decoded = AUTH_CREDS[cred]
    out: dict = {"cred": cred, "path": urllib.parse.urlsplit(url).scheme}
    if client in AUTH_SKIP:
        out.update(result="skipped", why=AUTH_SKIP[client], expected=decoded)
        return out
    model = AUTH_MODEL[client]
    as_written = f"{user}:{pw}"
    expected, other = (decoded, as_written) if model == AUTH_DECODES else (as_written, decoded)
    out.update(model=model, expected=expected)
    reqs = [r for r in recs if r["kind"] == "proxy" or PROXY_FORM.match(r["first_line"] or "")]
    reqs = [r for r in reqs if r["first_line"] and not r["first_line"].startswith("<")]
    out["requests"] = [r["first_line"].rsplit(" ", 1)[0] for r in reqs]
    out["challenged"] = any(r.get("challenged") for r in reqs)
    sent = [basic_credentials(v) for r in reqs for v in r["proxy_auth"]]
    out["sent"] = sent
    if not reqs:
        out["result"] = "no-proxy"
    elif not sent:
        out["result"] = "none"
    elif all(x == expected for x in sent):
        out["result"] = "pass"
    elif other != expected and other in sent:
        out["result"] = "raw" if model == AUTH_DECODES else "decoded"
        out["departs"] = True
    else:
        out["result"] = "other"
    return out


AUTH_WORDS = {
    "raw": "RAW (not decoded)",
    "decoded": "DECODED",
    "none": "NO HEADER",
    "other": "WRONG VALUE",
    "no-proxy": "NO PROXY USED",
}
# a pass, in the words of the client's model
AUTH_PASS_WORDS = {AUTH_DECODES: "decoded", AUTH_AS_WRITTEN: "as written"}


def auth_word(a: dict) -> str:
    return AUTH_PASS_WORDS[a["model"]] if a["result"] == "pass" else AUTH_WORDS.get(a["result"], a["result"])


def auth_failure(client: str, case_id: str, a: dict) -> str:
    """The report entry of one failed credentials check (holds the test passwords)."""
    text = f"[auth {client}] {case_id}: {auth_word(a)}\n"
    if a.get("departs"):
        text += (
            f"    DEPARTS FROM THE MODEL: AUTH_MODEL[{client!r}] = {a['model']!r}, but the client "
            f"{'sent the user-info as written' if a['result'] == 'raw' else 'decoded the user-info'}; "
            "the model must change (AUTH_MODEL in conformance.py, README 'Proxy credentials', "
            "what users are told about this client)\n"
        )
    return text + (
        f"    requests: {a['requests']}{' (after 407)' if a['challenged'] else ''}\n"
        f"    sent (decoded base64): {a['sent']!r}\n    expected ({a['model']}): {a['expected']!r}"
    )


def auth_table(clients: list[str], observations: list[dict]) -> list[str]:
    """Per client, per path (http / https URL): what the auth cases showed."""
    lines = [f"{'client':20s} {'model':17s} {'http path':34s} https path"]
    if not any("auth" in o for o in observations):
        return lines
    for c in clients:
        checks = [o["auth"] for o in observations if o["client"] == c and "auth" in o]
        if c in AUTH_SKIP:
            # java runs the auth cases only with --java-all (they are not in its sample)
            lines.append(f"{c:20s} skipped: {AUTH_SKIP[c]}")
            continue
        if not checks:
            continue
        cells = []
        for path in ("http", "https"):
            on = [a for a in checks if a["path"] == path]
            counts: dict[str, int] = {}
            for a in on:
                counts[auth_word(a)] = counts.get(auth_word(a), 0) + 1
            cell = ", ".join(f"{k} {n}/{len(on)}" for k, n in sorted(counts.items())) or "-"
            if any(a.get("challenged") and a["result"] == "pass" for a in on):
                cell += " (after 407)"
            cells.append(cell)
        departs = " <- DEPARTS FROM THE MODEL" if any(a.get("departs") for a in checks) else ""
        lines.append(f"{c:20s} {AUTH_MODEL[c]:17s} {cells[0]:34s} {cells[1]}{departs}")
    return lines


# --------------------------------------------------------------------------- clients
def base_env() -> dict[str, str]:
    home = WORK / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
    }


def venv_python() -> str:
    return str(WORK / "venv" / "bin" / "python")


def reqwest_bin() -> str:
    tgt = Path(os.environ.get("CARGO_TARGET_DIR") or (WORK / "reqwest-target"))
    return str(tgt / "release" / "reqwest-probe")


class PerProcess:
    """One process per case (curl, wget, Go, reqwest): the environment is the process's."""

    def __init__(self, name: str, argv_for):
        self.name = name
        self.argv_for = argv_for

    def run(self, server: Server, job: dict) -> dict:
        env = base_env()
        env.update(job["env"])
        mark = server.mark()
        t0 = time.monotonic()
        out = {"ok": False, "status": None, "error": None}
        try:
            p = subprocess.run(
                self.argv_for(job["url"]), env=env, capture_output=True, timeout=CLIENT_TIMEOUT, text=True, errors="replace"
            )
            parsed = None
            for line in p.stdout.splitlines():
                line = line.strip()
                if line.startswith("{"):
                    try:
                        parsed = json.loads(line)
                    except ValueError:
                        pass
            if parsed is not None:
                out.update({k: parsed.get(k) for k in ("ok", "status", "error")})
            else:
                out["ok"] = p.returncode == 0
                if p.returncode != 0:
                    out["error"] = f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
        except subprocess.TimeoutExpired:
            out["error"] = f"HANG: killed after {CLIENT_TIMEOUT}s"
            out["hang"] = True
        out["elapsed"] = round(time.monotonic() - t0, 3)
        out["connections"] = server.since(mark)
        return out

    def close(self):
        pass


def read_line(proc, buf: bytearray, timeout: float) -> str | None:
    """One line of a probe's stdout within `timeout`, keeping what follows it in `buf`;
    None on timeout or when the process closed its stdout (exited, or did not start)."""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sel = selectors.DefaultSelector()
        sel.register(fd, selectors.EVENT_READ)
        ready = sel.select(left)
        sel.close()
        if not ready:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line.decode("utf-8", "replace")


class Batch:
    """A long-lived probe process that takes jobs on stdin and sets the environment per
    job (for clients that read the environment per request or per client object)."""

    def __init__(self, name: str, argv: list[str], cwd: str | None = None):
        self.name = name
        self.argv = argv
        self.cwd = cwd
        self.proc = None
        self.version = None
        self._buf = bytearray()

    def _start(self):
        self.proc = subprocess.Popen(
            self.argv, env=base_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=self.cwd
        )
        self._buf = bytearray()
        line = self._readline(30)
        if line is None:
            raise RuntimeError(f"{self.name}: probe did not start")
        self.version = json.loads(line).get("version")

    def _readline(self, timeout: float) -> str | None:
        return read_line(self.proc, self._buf, timeout)

    def run(self, server: Server, job: dict) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        mark = server.mark()
        t0 = time.monotonic()
        out = {"ok": False, "status": None, "error": None}
        try:
            self.proc.stdin.write((json.dumps({"id": job["id"], "url": job["url"], "env": job["env"]}) + "\n").encode())
            self.proc.stdin.flush()
            line = self._readline(CLIENT_TIMEOUT)
        except (BrokenPipeError, OSError) as e:
            line = None
            out["error"] = f"probe died: {e}"
        if line is None:
            out["error"] = out["error"] or f"HANG: no answer after {CLIENT_TIMEOUT}s, probe killed"
            out["hang"] = True
            self.close()
        else:
            res = json.loads(line)
            if res.get("id") != job["id"]:
                raise RuntimeError(f"{self.name}: answer for {res.get('id')} while waiting for {job['id']}")
            for k, v in res.items():
                if k != "id":
                    out[k] = v
        out["elapsed"] = round(time.monotonic() - t0, 3)
        out["connections"] = server.since(mark)
        return out

    def close(self):
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait(5)
            except Exception:
                pass
            self.proc = None


class JavaProbe:
    """One JVM per case (HotSpot reads JAVA_TOOL_OPTIONS once, at start): java/Probe.java,
    compiled by run.sh into .work/java-classes. The probe makes its HttpURLConnection request,
    prints a JSON line and waits; with job["httpclient"] the driver then takes the connections
    seen so far as the HttpURLConnection's, tells the probe to go on, and attributes what comes
    next to java.net.http.HttpClient (recorded as the extra field `httpclient`)."""

    def __init__(self, name: str):
        self.name = name

    def run(self, server: Server, job: dict) -> dict:
        env = base_env()
        env.update(job["env"])
        # HttpClient too for the cases that set JAVA_TOOL_OPTIONS (without it both go direct)
        want_hc = bool(job.get("httpclient", JAVA_TOOL_OPTIONS in job["env"]))
        argv = [JAVA, "-cp", str(JAVA_CLASSES), "Probe", job["url"], *(["--httpclient"] if want_hc else [])]
        mark = server.mark()
        t0 = time.monotonic()
        out: dict = {"ok": False, "status": None, "error": None}
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        buf = bytearray()
        line = read_line(proc, buf, CLIENT_TIMEOUT)
        hc = None
        if line is not None:
            try:
                for k, v in json.loads(line).items():
                    out[k] = v
            except ValueError:
                out["error"] = f"probe printed no JSON: {line[:300]}"
            out["elapsed"] = round(time.monotonic() - t0, 3)
            out["connections"] = server.since(mark)
            if want_hc:
                mark2 = server.mark()
                try:
                    proc.stdin.write(b"go\n")
                    proc.stdin.flush()
                    line2 = read_line(proc, buf, CLIENT_TIMEOUT)
                except OSError as e:
                    line2 = None
                    hc = {"decision": "error", "proxy": None, "error": f"probe died: {e}"}
                # Everything is in (or it hung). HttpClient's selector thread waits in epoll:
                # HotSpot's exit would wait 300 ms for it (VM_Exit, max_wait_user_thread).
                proc.kill()
                conns = server.since(mark2)
                if line2 is not None:
                    try:
                        res2 = json.loads(line2)
                    except ValueError:
                        res2 = {"error": f"probe printed no JSON: {line2[:300]}"}
                    d, via = classify(conns)
                    hc = {"decision": d, "proxy": via, "error": res2.get("error"), "status": res2.get("status")}
                elif hc is None:
                    hc = {"decision": "error", "proxy": None, "error": f"HANG: no answer after {CLIENT_TIMEOUT}s"}
        try:
            # closes stdin: the probe skips (or ends) its HttpClient step and exits
            _, err = proc.communicate(timeout=CLIENT_TIMEOUT if line is not None else 0.5)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            if line is None:
                out["error"] = f"HANG: killed after {CLIENT_TIMEOUT}s"
                out["hang"] = True
        if line is None:
            if not out.get("hang"):
                stderr = err.decode("utf-8", "replace").strip()
                out["error"] = f"exit {proc.returncode}: {stderr[-300:]}"
            out["elapsed"] = round(time.monotonic() - t0, 3)
            out["connections"] = server.since(mark)
        if hc is not None:
            out["httpclient"] = hc
        return out

    def close(self):
        pass


def make_runners() -> dict:
    node_dir = str(HERE / "node")
    return {
        "curl": PerProcess("curl", lambda u: ["curl", "-q", "-sS", "-k", "-o", "/dev/null", "--max-time", "3", u]),
        "wget": PerProcess(
            "wget",
            lambda u: ["wget", "-q", "-O", "/dev/null", "--tries=1", "--timeout=3", "--no-check-certificate", "--max-redirect=0", u],
        ),
        "go": PerProcess("go", lambda u: [str(WORK / "go-probe"), u]),
        "python-urllib": Batch("python-urllib", [venv_python(), str(HERE / "python" / "probe.py"), "urllib"]),
        "python-requests": Batch("python-requests", [venv_python(), str(HERE / "python" / "probe.py"), "requests"]),
        "python-httpx": Batch("python-httpx", [venv_python(), str(HERE / "python" / "probe.py"), "httpx"]),
        "node-axios": Batch("node-axios", ["node", str(HERE / "node" / "probe.js"), "axios"], cwd=node_dir),
        "node-proxy-from-env": Batch(
            "node-proxy-from-env", ["node", str(HERE / "node" / "probe.js"), "proxy-from-env"], cwd=node_dir
        ),
        "node-undici": Batch("node-undici", ["node", str(HERE / "node" / "probe.js"), "undici"], cwd=node_dir),
        "ruby": Batch("ruby", ["ruby", str(HERE / "ruby" / "probe.rb")]),
        "rust-reqwest": PerProcess("rust-reqwest", lambda u: [reqwest_bin(), u]),
        "java": JavaProbe("java"),
    }


def client_versions(runners: dict) -> dict[str, str]:
    def first_line(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.splitlines()[0].strip()
        except Exception as e:  # noqa: BLE001
            return f"unknown ({e})"

    v = {
        "curl": first_line(["curl", "--version"]),
        "wget": first_line(["wget", "--version"]),
        "go": json.loads(first_line([str(WORK / "go-probe"), "-version"])).get("version"),
        "rust-reqwest": "reqwest " + reqwest_version(),
    }
    if "java" in runners:
        try:
            v["java"] = json.loads(first_line([JAVA, "-cp", str(JAVA_CLASSES), "Probe", "-version"])).get("version")
        except Exception as e:  # noqa: BLE001
            v["java"] = f"probe failed to start: {e}"
    for name, r in runners.items():
        if isinstance(r, Batch):
            try:
                r._start()
                v[name] = str(r.version)
            except Exception as e:  # noqa: BLE001
                v[name] = f"probe failed to start: {e}"
    v["python-urllib"] = f"CPython {v.get('python-urllib')}"
    v["python-requests"] = f"requests {v.get('python-requests')}"
    v["python-httpx"] = f"httpx {v.get('python-httpx')}"
    v["node-undici"] = f"undici {v.get('node-undici')} (node {first_line(['node', '--version'])})"
    v["ruby"] = f"ruby {v.get('ruby')} (Net::HTTP, URI::Generic#find_proxy)"
    return v


def reqwest_version() -> str:
    lock = (HERE / "reqwest-probe" / "Cargo.lock").read_text()
    m = re.search(r'name = "reqwest"\nversion = "([^"]+)"', lock)
    return m.group(1) if m else "?"


# --------------------------------------------------------------------------- engine
class Engine:
    def __init__(self, binary: str):
        self.binary = binary
        self.cache: dict = {}

    def explain(self, url: str, env: dict[str, str]) -> dict:
        key = (url, tuple(sorted(env.items())))
        if key in self.cache:
            return self.cache[key]
        argv = [*shlex.split(self.binary), "explain", "--dialect", "all", "--output", "json"]
        for k, v in env.items():
            argv += ["--env", f"{k}={v}"]
        argv.append(url)
        res: dict = {}
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=base_env())
            if p.returncode != 0:
                res = {"_error": f"explain exited {p.returncode}: {p.stderr.strip()[-400:]}"}
            elif any(x in p.stdout or x in p.stderr for x in SECRETS):
                res = {"_error": "explain printed the proxy password (credentials not redacted)"}
            else:
                arr = json.loads(p.stdout)
                res = {d["dialect"]: d for d in arr}
        except Exception as e:  # noqa: BLE001
            res = {"_error": f"explain failed: {e}"}
        self.cache[key] = res
        return res

    def render(self, dialect: str, entries: list[str]) -> dict:
        argv = [*shlex.split(self.binary), "render-no-proxy", "--dialect", dialect, "--output", "json", "--", *entries]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=base_env())
        if p.returncode != 0:
            return {"_error": f"render-no-proxy exited {p.returncode}: {p.stderr.strip()[-400:]}"}
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            return {"_error": f"render-no-proxy printed no JSON: {e}: {p.stdout[:200]}"}


def proxy_hostport(proxy_url: str | None) -> str | None:
    if not proxy_url:
        return None
    s = proxy_url
    scheme = "http"
    if "://" in s:
        scheme, s = s.split("://", 1)
    s = s.split("/", 1)[0]
    s = s.rsplit("@", 1)[-1]
    if re.search(r":\d+$", s):
        return s.lower()
    default = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080, "socks4": 1080}.get(scheme.lower(), 80)
    return f"{s.lower()}:{default}"


def listener_hostport(proxy_name: str | None) -> str | None:
    if not proxy_name or "," in proxy_name:
        return proxy_name
    if proxy_name.startswith(OTHER):
        return proxy_name.removeprefix(OTHER)
    return f"127.0.0.1:{PROXIES[proxy_name]}"


# --------------------------------------------------------------------------- inner main
def run_inner(args) -> int:
    t_start = time.monotonic()
    cases, renders = load_table(HERE / "cases.toml")
    # java's sample is drawn from the whole table, so a narrowed run picks the same cases
    java_ids = {c["id"] for c in java_cases(cases, args.java_all)}
    if args.case:
        cases = [c for c in cases if any(s in c["id"] for s in args.case)]
        renders = [r for r in renders if any(s in r["id"] for s in args.case)]
    clients = CLIENTS
    if args.client:
        wanted = [c for a in args.client for c in a.split(",")]
        for w in wanted:
            if w not in CLIENTS:
                print(f"unknown client {w}; known: {', '.join(CLIENTS)}", file=sys.stderr)
                return 2
        clients = [c for c in CLIENTS if c in wanted]

    ports = {url_host_port(c["url"])[1] for c in cases}
    for r in renders:
        ports |= {url_host_port(p["url"])[1] for p in r.get("probes", [])}
    ports |= {80, 443}
    clash = ports & set(PROXIES.values())
    if clash:
        print(f"case URLs use proxy listener ports {clash}", file=sys.stderr)
        return 2
    server = Server(ports)
    runners = make_runners()
    versions = client_versions({k: v for k, v in runners.items() if k in clients})
    print("client versions:")
    for c in clients:
        print(f"  {c:20s} {versions.get(c)}")
    sys.stdout.flush()

    engine = None if args.observe_only else Engine(args.engine)
    if engine is not None:
        pre = engine.explain("http://example.com/", {"HTTP_PROXY": "http://127.0.0.1:1"})
        if "_error" in pre:
            print(f"the engine does not answer: {args.engine}: {pre.get('_error')}", file=sys.stderr)
            print("0 passed, 1 failed")
            return 2
        # Every dialect the engine models must be checked here: one missing from CLIENTS
        # would otherwise pass unchecked. `portable` is every client at once.
        unchecked = sorted(set(pre) - set(CLIENTS) - {"portable"})
        if unchecked:
            print(f"the engine models dialects this run does not check: {', '.join(unchecked)} "
                  "(add them to CLIENTS, with a runner and a probe)", file=sys.stderr)
            print("0 passed, 1 failed")
            return 2
    observations: list[dict] = []
    harness_errors: list[str] = []

    # ---- self-check of the harness: a client that reaches nothing must show as error
    if not args.case:
        probe = {"id": "_selfcheck-unreachable", "url": "http://example.com:9/", "env": {}}
        # port 9 has no listener: the client must fail and nobody gets a connection
        for c in clients:
            r = runners[c].run(server, probe)
            d, _ = classify(r["connections"])
            if d != "error":
                harness_errors.append(f"self-check: {c} to a port without listener observed {d!r}, expected 'error'")

    stats = {c: {"cases": 0, "agree": 0, "disagree": 0, "auth_pass": 0, "auth_fail": 0, "auth_skip": 0} for c in clients}
    auth_fails: list[str] = []
    auth_departs: set[str] = set()  # clients whose Proxy-Authorization departs from AUTH_MODEL
    disagreements: list[str] = []
    hc_notes: list[str] = []
    for c in clients:
        t_c = time.monotonic()
        r = runners[c]
        for case in cases_for(c, cases, java_ids):
            server.challenge = bool(case.get("auth"))
            res = r.run(server, case)
            server.challenge = False
            decision, proxy, note = decide(c, res)
            obs = {
                "case": case["id"],
                "client": c,
                "url": case["url"],
                "env": case["env_template"],
                "decision": decision,
                "proxy": proxy,
                "proxy_addr": listener_hostport(proxy),
                "ok": res.get("ok"),
                "status": res.get("status"),
                "error": res.get("error"),
                "hang": bool(res.get("hang")),
                "elapsed": res.get("elapsed"),
                "connections": [
                    {"kind": x["kind"], "proxy": x["proxy"], "local": x["local"], "first_line": x["first_line"]}
                    | ({"proxy_auth": x["proxy_auth"]} if x["proxy_auth"] else {})
                    for x in res["connections"]
                ],
            }
            if note:
                obs["note"] = note
            if case.get("auth"):
                a = check_auth(c, case["url"], case["auth"], res["connections"])
                obs["auth"] = a
                if a["result"] == "skipped":
                    stats[c]["auth_skip"] += 1
                elif a["result"] == "pass":
                    stats[c]["auth_pass"] += 1
                else:
                    stats[c]["auth_fail"] += 1
                    auth_fails.append(auth_failure(c, case["id"], a))
                    if a.get("departs"):
                        auth_departs.add(c)
            for extra in ("pfe", "find_proxy", "net_http_proxy", "httpclient", "using_proxy"):
                if extra in res:
                    obs[extra] = res[extra]
            if decision == "direct" and res.get("ok") and res.get("status") != 200:
                obs["warning"] = "direct listener answered 200 but client reported another status"
            if engine is not None:
                ex = engine.explain(case["url"], case["env"])
                stats[c]["cases"] += 1
                if "_error" in ex or c not in ex:
                    why = ex.get("_error", f"no dialect {c} in explain output")
                    stats[c]["disagree"] += 1
                    obs["engine"] = None
                    obs["agree"] = False
                    disagreements.append(f"[{c}] {case['id']}: ENGINE ERROR {why}")
                else:
                    e = ex[c]
                    obs["engine"] = {k: e.get(k) for k in ("decision", "proxy", "matched", "variable", "reason")}
                    agree = e.get("decision") == decision
                    if agree and decision == "proxy":
                        agree = proxy_hostport(e.get("proxy")) == listener_hostport(proxy)
                    obs["agree"] = agree
                    hc = res.get("httpclient")
                    if hc is not None:
                        # java.net.http.HttpClient (default builder) in the same JVM: recorded and
                        # compared with the engine's `java` answer, listed apart (not counted)
                        hc_agree = e.get("decision") == hc["decision"] and (
                            hc["decision"] != "proxy" or proxy_hostport(e.get("proxy")) == listener_hostport(hc["proxy"])
                        )
                        hc["agree"] = hc_agree
                        if not hc_agree:
                            hc_notes.append(
                                f"[java HttpClient] {case['id']}\n    url={case['url']} env={fmt_env(case['env_template'])}\n"
                                f"    HttpClient: {hc['decision']}{' via ' + str(hc['proxy']) if hc['proxy'] else ''}"
                                f"{' (error: ' + str(hc.get('error'))[:160] + ')' if hc['decision'] == 'error' else ''}"
                                f"; HttpURLConnection: {decision}{' via ' + str(proxy) if proxy else ''}\n"
                                f"    engine: {e.get('decision')}{' via ' + str(e.get('proxy')) if e.get('proxy') else ''}"
                            )
                    if agree:
                        stats[c]["agree"] += 1
                    else:
                        stats[c]["disagree"] += 1
                        disagreements.append(
                            f"[{c}] {case['id']}\n    url={case['url']} env={fmt_env(case['env_template'])}\n"
                            f"    real: {decision}{' via ' + str(proxy) if proxy else ''}"
                            f"{' (error: ' + str(res.get('error'))[:160] + ')' if decision == 'error' else ''}\n"
                            f"    engine: {e.get('decision')}{' via ' + str(e.get('proxy')) if e.get('proxy') else ''}"
                            f" matched={e.get('matched')!r} variable={e.get('variable')} reason={e.get('reason')!r}"
                        )
            else:
                stats[c]["cases"] += 1
            if res.get("hang"):
                harness_errors.append(f"[{c}] {case['id']}: client hung and was killed")
            # The JDK reads no proxy variable: a sanity `expect = "proxy"` (proxy variables set)
            # does not hold for java unless the case sets JAVA_TOOL_OPTIONS.
            java_exempt = c == JAVA_CLIENT and case.get("expect") == "proxy" and JAVA_TOOL_OPTIONS not in case["env"]
            if case.get("expect") and decision != case["expect"] and not java_exempt:
                # a sanity case whose answer is known for every client, engine or not
                harness_errors.append(
                    f"[{c}] {case['id']}: sanity expectation {case['expect']!r} but observed {decision!r}"
                    f" ({res.get('error')})"
                )
            observations.append(obs)
        r.close()
        print(f"  ran {c:20s} {len(cases_for(c, cases, java_ids))} cases in {time.monotonic() - t_c:.1f}s", flush=True)

    # ---- render part
    render_results: list[dict] = []
    # Render checks: a false direct (the intents route the host through the proxy, the client went
    # direct) and a wrong proxy (the intents send it direct, nothing said it cannot, the client
    # used the proxy) must both be 0; a declared miss is an intent the render reported uncovered.
    rstats = {c: {"checks": 0, "pass": 0, "false_direct": 0, "wrong_proxy": 0, "other": 0, "declared": 0}
              for c in clients}
    if engine is not None and renders:
        t_r = time.monotonic()
        render_results, rfails = run_renders(renders, clients, runners, server, engine, rstats)
        disagreements += rfails
        for r in runners.values():
            r.close()
        print(f"  ran render checks in {time.monotonic() - t_r:.1f}s", flush=True)

    # ---- trust part (trust.py): a real intercepting proxy, the rendered variables and files
    trust_results, trust_obs, trust_lines = run_trust(args, clients, engine)

    server.stop = True
    elapsed = time.monotonic() - t_start

    OUT.mkdir(exist_ok=True)
    observed = {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "client_versions": {c: versions.get(c) for c in clients},
        "proxy_listeners": {n: f"http://127.0.0.1:{p}" for n, p in PROXIES.items()},
        "placeholders": placeholders(),
        "hosts": "every host name in the table resolves to 198.18.0.0/24 (never loopback) except localhost",
        "observations": observations,
        "render": render_results,
        "trust": trust_results,
        "trust_observed": trust_obs,
    }
    if args.case or args.client:
        path = OUT / "observed.partial.json"
    else:
        path = OUT / "observed.json"
    path.write_text(json.dumps(observed, indent=1, ensure_ascii=False) + "\n")

    lines = []
    lines.append(f"NO_PROXY conformance report ({observed['generated_at']})")
    for c in clients:
        lines.append(f"  {c:20s} {versions.get(c)}")
    lines.append("")
    if engine is None:
        lines.append("observe-only run: no comparison with the engine")
    lines.append(f"{'client':20s} {'cases':>6s} {'agree':>6s} {'disagree':>9s}   render: {'checks':>6s} {'pass':>5s} {'false-direct':>12s} {'wrong-proxy':>11s} {'other':>5s} {'declared-miss':>13s}")
    for c in clients:
        s, rs = stats[c], rstats[c]
        lines.append(
            f"{c:20s} {s['cases']:6d} {s['agree']:6d} {s['disagree']:9d}   render: {rs['checks']:6d} {rs['pass']:5d} "
            f"{rs['false_direct']:12d} {rs['wrong_proxy']:11d} {rs['other']:5d} {rs['declared']:13d}"
        )
    # `portable` keeps an entry unless some client misroutes or fails because of it: every
    # portable rendering, checked against every client, with no false direct.
    port = [r for r in render_results if r["dialect"] == "portable"]
    count = lambda *kinds: sum(1 for r in port if r["result"] in kinds)
    lines.append(
        f"{'portable x all':20s} {'':6s} {'':6s} {'':9s}   render: {len(port) - count('declared miss (intent uncovered)'):6d} "
        f"{count('pass'):5d} {count('false_direct'):12d} {count('wrong_proxy'):11d} {count('other'):5d} "
        f"{count('declared miss (intent uncovered)'):13d}"
    )
    lines.append("")
    if harness_errors:
        lines.append(f"HARNESS ERRORS ({len(harness_errors)}):")
        lines += ["  " + h for h in harness_errors]
        lines.append("")
    auth_lines = auth_table(clients, observations)
    if len(auth_lines) > 1:
        lines.append(
            "PROXY CREDENTIALS (auth cases: Proxy-Authorization from a percent-encoded user-info, "
            "decoded or as written as AUTH_MODEL says):"
        )
        lines += ["  " + x for x in auth_lines]
        lines.append(f"AUTH FAILURES ({len(auth_fails)}):")
        lines += auth_fails
        lines.append("")
    if engine is not None:
        lines.append(f"DISAGREEMENTS ({len(disagreements)}):")
        lines += disagreements
        lines.append("")
        lines.append(
            f"JAVA HttpClient (default builder, recorded, not counted) DIFFERS FROM THE ENGINE ({len(hc_notes)}):"
        )
        lines += hc_notes
    lines += trust_lines
    report = "\n".join(lines) + "\n"
    report_path = OUT / ("report.partial.txt" if (args.case or args.client) else "report.txt")
    if engine is not None:
        report_path.write_text(report)

    print()
    # summary to stdout (the disagreement list goes to the report file, head shown here)
    table_start = len(clients) + 2
    print("\n".join(lines[table_start : table_start + 3 + len(clients) + (1 if engine is None else 0)]))
    if harness_errors:
        print(f"HARNESS ERRORS ({len(harness_errors)}):")
        for h in harness_errors[:20]:
            print("  " + h)
    if len(auth_lines) > 1:
        # verdicts only: the decoded values (test passwords) are in the report and observations
        print("PROXY CREDENTIALS (Proxy-Authorization from a percent-encoded user-info, as AUTH_MODEL says?):")
        print("\n".join("  " + x for x in auth_lines))
        if auth_fails:
            print(f"{len(auth_fails)} auth failures (details in {report_path if engine is not None else path})")
        for c in sorted(auth_departs):
            print(
                f"  {c} departs from AUTH_MODEL[{c!r}] = {AUTH_MODEL[c]!r}: the model must change "
                "(AUTH_MODEL in conformance.py, README 'Proxy credentials', what users are told)"
            )
    if engine is not None and disagreements:
        print(f"{len(disagreements)} disagreements; first ones (all in {report_path}):")
        for d in disagreements[:15]:
            print(d)
    if engine is not None and hc_notes:
        print(f"{len(hc_notes)} java HttpClient observations differ from the engine (not counted; all in {report_path}):")
        for d in hc_notes[:5]:
            print(d)
    if trust_lines:
        print("\n".join(x for x in trust_lines if not x.startswith(("[trust ", "    "))))
    print(f"observations: {path}")
    print(f"elapsed: {elapsed:.1f}s")
    # the credentials check needs no engine: it counts in both modes (one per auth case and client)
    auth_pass = sum(s["auth_pass"] for s in stats.values())
    auth_fail = sum(s["auth_fail"] for s in stats.values())
    # trust checks: one pass per agreeing check; false trust, false distrust and other fail
    trust_pass = sum(1 for r in trust_results if r["result"] == "agree")
    trust_fail = len(trust_results) - trust_pass
    if engine is None:
        n = len(observations)
        print(f"{n + auth_pass} passed, {len(harness_errors) + auth_fail} failed")
        return 1 if harness_errors or auth_fail else 0
    passed = sum(s["agree"] for s in stats.values()) + sum(s["pass"] for s in rstats.values()) + auth_pass + trust_pass
    failed = sum(s["disagree"] for s in stats.values()) + sum(s["false_direct"] + s["wrong_proxy"] + s["other"] for s in rstats.values()) + len(harness_errors) + auth_fail + trust_fail
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def run_trust(args, clients: list[str], engine) -> tuple[list[dict], list[dict], list[str]]:
    """The trust section (see trust.py and README "Trust"): the checks against `render trust`
    (with the engine), the observation of what each client reads (--observe-only,
    --trust-observe). -> (check results, observations, report lines)."""
    dialects = [d for d in clients if d != JAVA_CLIENT] + ["portable"] + ([JAVA_CLIENT] if JAVA_CLIENT in clients else [])
    if args.case:
        dialects = [d for d in dialects if any(s in f"trust/{d}/" for s in args.case)]
    observe = engine is None or args.trust_observe
    if args.no_trust or not dialects or not shutil.which("mitmdump"):
        if not args.no_trust and dialects:
            return [], [], ["HARNESS ERROR: trust: mitmdump not installed (run.sh installs mitmproxy)"]
        return [], [], []
    t0 = time.monotonic()
    tclients = trust.client_names(clients)
    setup = trust.Setup()
    lines = ["", f"TRUST (intercepting proxy {trust.mitm_version()}; setup {setup.elapsed:.1f}s; "
             f"public test root added to: {'; '.join(setup.overlay)})"]
    results, obs = [], []
    try:
        if observe:
            t_o = time.monotonic()
            obs, olines = trust.observe(tclients, setup.pki)
            lines += ["What each client reads (variable -> the corporate CA alone; adds = the default store kept):"]
            lines += ["  " + x for x in olines]
            print(f"  ran trust observation in {time.monotonic() - t_o:.1f}s", flush=True)
        if engine is not None:
            cmd = shlex.split(args.engine)
            t_c = time.monotonic()
            results = trust.run_checks(cmd, dialects, tclients, setup.pki)
            print(f"  ran {len(results)} trust checks in {time.monotonic() - t_c:.1f}s", flush=True)
            lines += ["Trust checks (render trust per dialect; proxied / public (kept root) / unrelated origin):"]
            lines += ["  " + x for x in trust.table(results)]
            lines.append(trust.summary(results))
            fails = trust.failures(results)
            lines.append(f"TRUST FAILURES ({len(fails)}):")
            lines += fails
    finally:
        setup.stop()
    lines.append(f"trust section: {time.monotonic() - t0:.1f}s")
    return results, obs, lines


JVM_OPTION_VARS = (JAVA_TOOL_OPTIONS, "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "JAVA_OPTS")


def cases_for(client: str, cases: list[dict], java_ids: set[str]) -> list[dict]:
    """The cases a client runs: every case, except for java (see java_cases)."""
    if client != JAVA_CLIENT:
        return cases
    return [c for c in cases if c["id"] in java_ids]


def java_cases(cases: list[dict], java_all: bool = False) -> list[dict]:
    """The cases java runs (a JVM per case, ~0.15 s; ~0.3 s with the HttpClient step): the
    `java-*` cases and every case that sets a JVM option variable, and of the other cases
    (which only prove that the JDK ignores the proxy variables) a sample: for each distinct
    URL, the first case in table order that sets a proxy variable. `--java-all`: every case."""
    if java_all:
        return cases
    out, seen = [], set()
    for c in cases:
        if c["id"].startswith("java-") or any(v in c["env"] for v in JVM_OPTION_VARS):
            out.append(c)
        elif c["url"] not in seen and any(k.lower().endswith("_proxy") and k.lower() != "no_proxy" for k in c["env"]):
            seen.add(c["url"])
            out.append(c)
    return out


def fmt_env(env: dict) -> str:
    return " ".join(f"{k}={v!r}" for k, v in env.items()) or "(none)"


def norm_entry(e: str) -> str:
    return e.strip().lower().rstrip(".")


def run_renders(renders, clients, runners, server, engine, rstats):
    results = []
    fails = []
    proxy = placeholders()["proxy_upper"]
    dialects = [c for c in clients] + ["portable"]
    # `portable` is a NO_PROXY value for the clients that read the variables; the JDK reads
    # none (the operator writes java's own rendering into JAVA_TOOL_OPTIONS for it)
    portable_clients = [c for c in clients if c != JAVA_CLIENT]
    for rset in renders:
        entries = rset["entries"]
        for d in dialects:
            out = engine.render(d, entries)
            if "_error" in out:
                targets = portable_clients if d == "portable" else [d]
                for c in targets:
                    rstats[c]["checks"] += 1
                    rstats[c]["other"] += 1
                fails.append(f"[render {d}] {rset['id']}: ENGINE ERROR {out['_error']}")
                continue
            value = out.get("value", "")
            # Per uncovered intent: the clients that do not send it direct (None: every
            # client; the entry is not written). A `portable` entry some clients ignore is
            # written and still checked for every other client.
            uncovered = {
                norm_entry(u.get("entry", "")): (set(u["clients"]) if u.get("clients") else None)
                for u in out.get("uncovered", [])
            }
            if d == JAVA_CLIENT:
                # the JDK reads only JAVA_TOOL_OPTIONS; the engine writes the java rendering
                # (the http.nonProxyHosts value) into it after the proxy properties
                host, port = proxy_hostport(proxy).rsplit(":", 1)
                env = {
                    JAVA_TOOL_OPTIONS: f"-Dhttp.proxyHost={host} -Dhttp.proxyPort={port} "
                    f"-Dhttps.proxyHost={host} -Dhttps.proxyPort={port} -Dhttp.nonProxyHosts={value}"
                }
            else:
                env = {
                    "HTTP_PROXY": proxy,
                    "http_proxy": proxy,
                    "HTTPS_PROXY": proxy,
                    "https_proxy": proxy,
                    "NO_PROXY": value,
                    "no_proxy": value,
                }
            shown = f"{JAVA_TOOL_OPTIONS}={env[JAVA_TOOL_OPTIONS]!r}" if d == JAVA_CLIENT else f"NO_PROXY={value!r}"
            targets = portable_clients if d == "portable" else [d]
            for i, pr in enumerate(rset["probes"]):
                for c in targets:
                    rec = {
                        "id": f"{rset['id']}#{i}",
                        "dialect": d,
                        "client": c,
                        "url": pr["url"],
                        "intent": pr["intent"],
                        "expect": pr["expect"],
                        "value": value,
                    }
                    # An uncovered intent is a declared miss for what should go direct; what
                    # should use the proxy is still checked (it must not go direct).
                    key = norm_entry(pr["intent"])
                    missed = key in uncovered and (uncovered[key] is None or c in uncovered[key])
                    if missed and pr["expect"] == "direct":
                        rec["result"] = "declared miss (intent uncovered)"
                        rstats[c]["declared"] += 1
                        results.append(rec)
                        continue
                    job = {"id": f"render:{d}:{rset['id']}#{i}", "url": pr["url"], "env": env, "httpclient": False}
                    res = runners[c].run(server, job)
                    obs, via, _note = decide(c, res)
                    rec["observed"] = obs
                    rec["error"] = res.get("error")
                    rstats[c]["checks"] += 1
                    if obs == pr["expect"]:
                        rec["result"] = "pass"
                        rstats[c]["pass"] += 1
                    else:
                        # No excuse: a warning does not make a wrong route right.
                        if pr["expect"] == "proxy" and obs == "direct":
                            kind = "false_direct"
                        elif pr["expect"] == "direct" and obs == "proxy":
                            kind = "wrong_proxy"
                        else:
                            kind = "other"
                        rec["result"] = kind
                        rstats[c][kind] += 1
                        fails.append(
                            f"[render {d} -> {c}] {rset['id']}#{i} intent={pr['intent']!r} url={pr['url']}\n"
                            f"    {shown}\n"
                            f"    expected {pr['expect']}, real client: {obs} ({kind})"
                            f"{' via ' + via if via else ''}{' (error: ' + str(res.get('error'))[:160] + ')' if obs == 'error' else ''}"
                        )
                    results.append(rec)
    return results, fails


# --------------------------------------------------------------------------- outer main
def all_hostnames(cases: list[dict], renders: list[dict]) -> list[str]:
    names = set()
    urls = [c["url"] for c in cases] + [p["url"] for r in renders for p in r.get("probes", [])]
    for u in urls:
        h = (urllib.parse.urlsplit(u).hostname or "").lower()
        if not h:
            continue
        try:
            ipaddress.ip_address(h)
            continue
        except ValueError:
            pass
        if h.rstrip(".") == "localhost":
            continue
        names.add(h.rstrip("."))
    return sorted(names)


def remove_stale_namespaces() -> None:
    """Remove namespaces left by an earlier run of this driver that was killed (its pid is gone)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"(epoconf(\d+))\b", line.strip())
        if m and not Path(f"/proc/{m.group(2)}").exists():
            subprocess.run(["ip", "netns", "del", m.group(1)], check=False)
            shutil.rmtree(Path("/etc/netns") / m.group(1), ignore_errors=True)


def run_outer(args) -> int:
    if os.geteuid() != 0:
        print("conformance.py must run as root (it creates a network namespace)", file=sys.stderr)
        return 2
    cases, renders = load_table(HERE / "cases.toml")
    names = all_hostnames(cases, renders)
    if len(names) + len(trust.HOSTS) > 240:
        raise SystemExit("too many host names for 198.18.0.0/24")
    remove_stale_namespaces()
    ns = f"epoconf{os.getpid()}"
    etc = Path("/etc/netns") / ns
    hosts = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback"]
    for i, n in enumerate(names, start=10):
        hosts.append(f"198.18.0.{i} {n} {n}.")
    # the trust section's HTTPS origins (trust.py), like every other name: never loopback
    for i, n in enumerate(trust.HOSTS, start=10 + len(names)):
        hosts.append(f"198.18.0.{i} {n}")
    # The machine's own name, as on any host: the JDK connects to 0.0.0.0 / [::] by looking
    # it up (InetAddress.getLocalHost()); without it that lookup fails inside the namespace.
    me = socket.gethostname()
    if me and me.lower() not in names and me.lower() != "localhost":
        hosts.append(f"127.0.1.1 {me}")
    created = False
    rc = 2
    old_int = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        etc.mkdir(parents=True)
        (etc / "hosts").write_text("\n".join(hosts) + "\n")
        # a resolver that answers nothing: names outside the table do not resolve
        (etc / "resolv.conf").write_text("nameserver 127.0.0.53\noptions timeout:1 attempts:1\n")
        subprocess.run(["ip", "netns", "add", ns], check=True)
        created = True
        sh = lambda *a: subprocess.run(["ip", "netns", "exec", ns, *a], check=True)  # noqa: E731
        sh("ip", "link", "set", "lo", "up")
        sh("ip", "route", "add", "local", "0.0.0.0/0", "dev", "lo")
        sh("ip", "-6", "route", "add", "local", "::/0", "dev", "lo")
        # nothing in the namespace can reach outside it: there is no other interface
        links = subprocess.run(["ip", "netns", "exec", ns, "ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
        if [l for l in links.splitlines() if ": lo:" not in l]:
            raise SystemExit(f"namespace {ns} has interfaces other than lo: {links}")
        argv = ["ip", "netns", "exec", ns, sys.executable, str(Path(__file__).resolve()), "--inner", *sys.argv[1:]]
        rc = subprocess.call(argv)
    except KeyboardInterrupt:
        rc = 130
    finally:
        signal.signal(signal.SIGINT, old_int)
        if created:
            subprocess.run(["ip", "netns", "del", ns], check=False)
        shutil.rmtree(etc, ignore_errors=True)
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--observe-only", action="store_true", help="run the clients only, no engine comparison")
    ap.add_argument("--client", action="append", help="only this client (repeatable, or comma-separated)")
    ap.add_argument("--case", action="append", help="only cases whose id contains this substring (repeatable)")
    ap.add_argument(
        "--engine",
        default=os.environ.get("EPO_BIN") or str(HERE.parent.parent / "target" / "release" / "egress-proxy-operator"),
        help="egress-proxy-operator binary, or a command line split like a shell would"
        " (default: $EPO_BIN or target/release)",
    )
    ap.add_argument(
        "--java-all", action="store_true", help="run java on every case, not only the java ones and a sample (+~1 min)"
    )
    ap.add_argument("--no-trust", action="store_true", help="skip the trust section")
    ap.add_argument(
        "--trust-observe",
        action="store_true",
        help="also measure which CA variable each client reads (always done with --observe-only)",
    )
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        return run_inner(args)
    return run_outer(args)


if __name__ == "__main__":
    sys.exit(main())
