#!/usr/bin/env python3
"""Strategic-merge-patch cases checked against real kubectl (apimachinery's own code).

Generates a few hundred (original object, strategic patch) pairs from a fixed seed, runs each
through `kubectl patch --local -f ORIG.json --type strategic -p PATCH -o json`, and writes
originals, patches and kubectl's answer (the object, or the exit status and message) to
kube-sim/tests/upstream/smp-cases.json. kube-sim/tests/it/strategic_upstream.rs replays them.

Every case runs twice: a case whose two answers differ (apimachinery walks Go maps in random
order) is left out and counted in the file.

Usage: python3 kube-sim/tests/upstream/smp/generate.py [--kubectl PATH] [--out FILE]
"""

import argparse
import concurrent.futures
import copy
import json
import os
import random
import shutil
import subprocess
import tempfile

SEED = 20250723
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "smp-cases.json")


def default_kubectl():
    plain = shutil.which("kubectl")
    if plain:
        beside = os.path.join(os.path.dirname(os.path.realpath(plain)), "kubectl.1.33")
        if os.access(beside, os.X_OK):
            return beside
    return plain or "kubectl"


# ---------------------------------------------------------------- objects

ENV_NAMES = ["A", "B", "C", "D", "HTTP_PROXY", "https_proxy", "NO_PROXY", "LOG", "MODE"]


def env_value(rng, name):
    r = rng.random()
    if r < 0.5:
        return {"name": name, "value": f"v{rng.randint(0, 99)}"}
    if r < 0.75:
        return {"name": name, "valueFrom": {"secretKeyRef": {"name": "s1", "key": name.lower()}}}
    return {"name": name, "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": name.lower()}}}


def container(rng, name, n_env=None):
    names = rng.sample(ENV_NAMES, n_env if n_env is not None else rng.randint(0, 4))
    c = {"name": name, "image": f"{name}:1"}
    if names:
        c["env"] = [env_value(rng, n) for n in names]
    if rng.random() < 0.5:
        c["ports"] = [{"containerPort": 8080, "protocol": "TCP", "name": "http"}]
        if rng.random() < 0.4:
            c["ports"].append({"containerPort": 9090, "protocol": "TCP"})
    if rng.random() < 0.5:
        c["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
        if rng.random() < 0.5:
            c["volumeMounts"].append({"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True})
    if rng.random() < 0.4:
        c["args"] = ["--a", "--b"]
    return c


def pod_spec(rng):
    spec = {"containers": [container(rng, "app")]}
    if rng.random() < 0.6:
        spec["containers"].append(container(rng, "side"))
    if rng.random() < 0.4:
        spec["initContainers"] = [container(rng, "init")]
    if rng.random() < 0.6:
        spec["volumes"] = [
            {"name": "data", "emptyDir": {}},
            {"name": "cfg", "configMap": {"name": "cm1"}},
        ]
    if rng.random() < 0.4:
        spec["tolerations"] = [{"key": "k1", "operator": "Exists", "effect": "NoSchedule"}]
    if rng.random() < 0.4:
        spec["imagePullSecrets"] = [{"name": "reg1"}]
    return spec


def metadata(rng, name):
    m = {"name": name, "namespace": "default", "labels": {"app": name}}
    if rng.random() < 0.6:
        m["annotations"] = {"a/one": "1", "egressproxy.io/config-hash": "abc"}
    if rng.random() < 0.3:
        m["finalizers"] = ["f/one", "f/two"]
    return m


def template(rng):
    return {"metadata": {"labels": {"app": "x"}}, "spec": pod_spec(rng)}


def workload(rng, kind):
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata(rng, "p"), "spec": pod_spec(rng)}
    api = "batch/v1" if kind == "CronJob" else "apps/v1"
    obj = {"apiVersion": api, "kind": kind, "metadata": metadata(rng, "w")}
    if kind == "CronJob":
        obj["spec"] = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template(rng)}}}
    else:
        obj["spec"] = {"selector": {"matchLabels": {"app": "x"}}, "template": template(rng)}
    if kind == "Deployment":
        obj["spec"]["replicas"] = 2
        obj["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    if kind == "StatefulSet":
        obj["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
    return obj


def pod_spec_of(obj):
    kind = obj["kind"]
    if kind == "Pod":
        return obj["spec"]
    if kind == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def at_pod_spec(kind, spec_patch, tpl_meta=None):
    """Wraps a pod spec patch (and template metadata patch) at the kind's path."""
    if kind == "Pod":
        out = {"spec": spec_patch} if spec_patch is not None else {}
        if tpl_meta is not None:
            out["metadata"] = tpl_meta
        return out
    tpl = {}
    if tpl_meta is not None:
        tpl["metadata"] = tpl_meta
    if spec_patch is not None:
        tpl["spec"] = spec_patch
    if kind == "CronJob":
        return {"spec": {"jobTemplate": {"spec": {"template": tpl}}}}
    return {"spec": {"template": tpl}}


KINDS = ["Deployment"] * 6 + ["StatefulSet", "DaemonSet", "CronJob", "Pod"]


# ---------------------------------------------------------------- case families


def names_of(items, key="name"):
    return [i[key] for i in items or []]


def env_change(rng, c):
    """A random env patch for container c: adds, modifications, deletes, switches."""
    have = names_of(c.get("env"))
    out = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.35 or not have:
            out.append(env_value(rng, rng.choice(ENV_NAMES)))
        elif r < 0.55:
            out.append({"name": rng.choice(have), "$patch": "delete"})
        elif r < 0.7:
            out.append({"name": rng.choice(have), "value": "new", "valueFrom": None})
        elif r < 0.85:
            out.append({"name": rng.choice(have), "value": None,
                        "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}, "configMapKeyRef": None}})
        else:
            out.append({"name": rng.choice(have),
                        "valueFrom": {"configMapKeyRef": {"name": "cm2", "key": "k"}}})
    # one entry per name, as clients send
    seen, uniq = set(), []
    for e in out:
        if e["name"] not in seen:
            seen.add(e["name"])
            uniq.append(e)
    return uniq


def fam_env(rng, kind):
    obj = workload(rng, kind)
    spec = pod_spec_of(obj)
    cs = rng.sample(spec["containers"], rng.randint(1, len(spec["containers"])))
    patch_cs = [{"name": c["name"], "env": env_change(rng, c)} for c in cs]
    return obj, at_pod_spec(kind, {"containers": patch_cs})


def fam_env_replace_list(rng, kind):
    obj = workload(rng, kind)
    c = pod_spec_of(obj)["containers"][0]
    env = [env_value(rng, n) for n in rng.sample(ENV_NAMES, rng.randint(0, 2))]
    pos = rng.randint(0, len(env))
    env.insert(pos, {"$patch": "replace"})
    return obj, at_pod_spec(kind, {"containers": [{"name": c["name"], "env": env}]})


def fam_set_order(rng, kind):
    """As kubectl apply writes it: $setElementOrder lists every desired name in order."""
    obj = workload(rng, kind)
    c = pod_spec_of(obj)["containers"][0]
    have = names_of(c.get("env"))
    desired = list(have)
    rng.shuffle(desired)
    changed = []
    for n in rng.sample(ENV_NAMES, rng.randint(0, 2)):
        if n not in desired:
            desired.insert(rng.randint(0, len(desired)), n)
            changed.append(env_value(rng, n))
    if desired and rng.random() < 0.4:
        gone = desired.pop(rng.randrange(len(desired)))
        changed = [e for e in changed if e["name"] != gone]
        if gone in have:
            changed.append({"name": gone, "$patch": "delete"})
    changed.sort(key=lambda e: desired.index(e["name"]) if e["name"] in desired else 99)
    cp = {"name": c["name"], "$setElementOrder/env": [{"name": n} for n in desired]}
    if changed:
        cp["env"] = changed
    spec = {"containers": [cp]}
    if rng.random() < 0.5:
        order = names_of(pod_spec_of(obj)["containers"])
        rng.shuffle(order)
        spec["$setElementOrder/containers"] = [{"name": n} for n in order]
    return obj, at_pod_spec(kind, spec)


def fam_containers(rng, kind):
    obj = workload(rng, kind)
    spec = pod_spec_of(obj)
    field = "initContainers" if rng.random() < 0.3 else "containers"
    have = names_of(spec.get(field))
    items = []
    for _ in range(rng.randint(1, 3)):
        r = rng.random()
        if r < 0.4:
            items.append(container(rng, rng.choice(["new1", "new2", "app", "side", "init"]), 1))
        elif r < 0.6 and have:
            items.append({"name": rng.choice(have), "$patch": "delete"})
        elif have:
            items.append({"name": rng.choice(have), "image": "changed:2"})
    seen, uniq = set(), []
    for i in items:
        if i["name"] not in seen:
            seen.add(i["name"])
            uniq.append(i)
    return obj, at_pod_spec(kind, {field: uniq})


def fam_volumes(rng, kind):
    obj = workload(rng, kind)
    r = rng.random()
    if r < 0.25:
        vols = [{"name": "cfg", "secret": {"secretName": "s1"}}]
    elif r < 0.5:
        vols = [{"name": "cfg", "secret": {"secretName": "s1"}, "$retainKeys": ["name", "secret"]}]
    elif r < 0.6:
        vols = [{"name": "cfg", "secret": {"secretName": "s1"}, "$retainKeys": ["name"]}]
    elif r < 0.8:
        vols = [{"name": "extra", "emptyDir": {}}, {"name": "data", "$patch": "delete"}]
    else:
        vols = [{"name": "data", "emptyDir": {"medium": "Memory"}}, {"name": "new", "secret": {"secretName": "x"}}]
    spec = {"volumes": vols}
    if rng.random() < 0.5:
        c = pod_spec_of(obj)["containers"][0]
        mounts = [{"name": "extra", "mountPath": "/extra"}]
        if rng.random() < 0.5:
            mounts.append({"mountPath": "/data", "$patch": "delete"})
        spec["containers"] = [{"name": c["name"], "volumeMounts": mounts}]
    return obj, at_pod_spec(kind, spec)


def fam_ports(rng, kind):
    obj = workload(rng, kind)
    c = pod_spec_of(obj)["containers"][0]
    choices = [
        [{"containerPort": 8080, "protocol": "UDP"}],
        [{"containerPort": 7000, "protocol": "TCP", "name": "extra"}],
        [{"containerPort": 9090, "$patch": "delete"}, {"containerPort": 6000}],
        [{"containerPort": 8080, "protocol": "UDP", "name": "dns"}, {"containerPort": 53}],
        [{"name": "noport"}],
    ]
    return obj, at_pod_spec(kind, {"containers": [{"name": c["name"], "ports": rng.choice(choices)}]})


def fam_lists_replaced(rng, kind):
    """Fields without a patch strategy: tolerations, args, command; imagePullSecrets merge."""
    obj = workload(rng, kind)
    c = pod_spec_of(obj)["containers"][0]
    r = rng.random()
    if r < 0.25:
        spec = {"tolerations": [{"key": "k2", "operator": "Exists"}]}
    elif r < 0.35:
        spec = {"tolerations": [{"key": "k1", "$patch": "delete"}]}
    elif r < 0.55:
        spec = {"containers": [{"name": c["name"], "args": ["--c"]}]}
    elif r < 0.65:
        spec = {"containers": [{"name": c["name"], "$deleteFromPrimitiveList/args": ["--a"]}]}
    elif r < 0.85:
        spec = {"imagePullSecrets": [{"name": "reg2"}]}
    else:
        spec = {"imagePullSecrets": [{"name": "reg1", "$patch": "delete"}]}
    return obj, at_pod_spec(kind, spec)


def fam_meta(rng, kind):
    obj = workload(rng, kind)
    r = rng.random()
    meta = {}
    if r < 0.2:
        meta = {"annotations": {"a/one": None, "b/two": "2"}, "labels": {"app": None, "tier": "web"}}
    elif r < 0.3:
        meta = {"annotations": {"$patch": "delete"}}
    elif r < 0.4:
        meta = {"labels": {"$patch": "replace", "only": "this"}}
    elif r < 0.55:
        meta = {"finalizers": rng.choice([["f/three"], ["f/two", "f/zero"], ["f/one"]])}
    elif r < 0.65:
        meta = {"$deleteFromPrimitiveList/finalizers": ["f/one", "f/missing"]}
    elif r < 0.75:
        meta = {"$setElementOrder/finalizers": ["f/two", "f/new", "f/one"], "finalizers": ["f/new"]}
    elif r < 0.85:
        meta = {"ownerReferences": [{"apiVersion": "v1", "kind": "X", "name": "o", "uid": "u1"}]}
    else:
        meta = {"annotations": None, "labels": {"new": "1"}}
    return obj, {"metadata": meta}


def fam_strategy(rng, _kind):
    obj = workload(rng, "Deployment")
    choices = [
        {"type": "Recreate", "$retainKeys": ["type"]},
        {"type": "Recreate"},
        {"type": "Recreate", "rollingUpdate": None},
        {"$retainKeys": ["type", "rollingUpdate"], "rollingUpdate": {"maxSurge": 3}},
        {"type": "Recreate", "$retainKeys": ["rollingUpdate"]},
        {"$retainKeys": "type", "type": "Recreate"},
        {"$retainKeys": [], "rollingUpdate": None},
    ]
    return obj, {"spec": {"strategy": rng.choice(choices)}}


def fam_invalid(rng, kind):
    obj = workload(rng, kind)
    c = pod_spec_of(obj)["containers"][0]
    cn = c["name"]
    choices = [
        {"metadata": {"labels": {"$patch": "merge"}}},
        {"metadata": {"annotations": {"$patch": "remove"}}},
        at_pod_spec(kind, {"containers": [{"name": cn, "$patch": "remove"}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "$patch": "merge"}]}),
        at_pod_spec(kind, {"containers": [{"image": "no-name"}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "$setElementOrder/env": [{"name": "ZZ"}],
                                           "env": [{"name": "A", "value": "1"}]}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "$setElementOrder/env": [{"name": "B"}, {"name": "A"}],
                                           "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "$setElementOrder/env": "A"}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "env": ["A=1"]}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "env": [{"$patch": "delete"}]}]}),
        {"metadata": {"$deleteFromPrimitiveListfinalizers": ["x"]}},
        {"metadata": {"$setElementOrder": ["x"]}},
        {"$patch": "replace", "apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": {"name": "only"}},
        {"metadata": {"finalizers": [{"$patch": "replace"}, "x"]}},
    ]
    return obj, rng.choice(choices)


def fam_shapes(rng, kind):
    """Type switches, nulls and directives inside new subtrees."""
    obj = workload(rng, kind)
    c = pod_spec_of(obj)["containers"][0]
    cn = c["name"]
    choices = [
        at_pod_spec(kind, {"containers": [{"name": "fresh", "image": "f", "env": [{"name": "X", "value": None}]}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "resources": {"limits": {"cpu": "1", "memory": None}}}]}),
        at_pod_spec(kind, {"nodeSelector": {"disk": "ssd", "zone": None}}),
        at_pod_spec(kind, {"containers": [{"name": cn, "securityContext": {"runAsUser": None, "privileged": False}}]}),
        at_pod_spec(kind, {"containers": [{"name": "fresh", "env": [{"name": "Y", "$patch": "delete"}]}]}),
        at_pod_spec(kind, {"affinity": {"$patch": "delete"}}),
        at_pod_spec(kind, {"securityContext": {"$patch": "replace", "runAsNonRoot": True}}),
        at_pod_spec(kind, {"volumes": []}),
        at_pod_spec(kind, {"containers": [{"name": cn, "env": []}]}),
        at_pod_spec(kind, {"containers": [{"name": cn, "env": None}]}),
        at_pod_spec(kind, {"tolerations": None, "dnsConfig": {"options": [{"name": "ndots", "value": "2"}]}}),
        {"metadata": {"labels": "flat"}},
        {"metadata": {"annotations": {"x": {"nested": "map"}}}},
    ]
    return obj, rng.choice(choices)


# ----------------------------------------------------- other kinds


def fam_service(rng, _kind):
    obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"},
           "spec": {"selector": {"app": "x"}, "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}
    choices = [
        {"spec": {"ports": [{"port": 80, "protocol": "UDP", "name": "dns"}]}},
        {"spec": {"ports": [{"port": 443, "name": "https"}]}},
        {"spec": {"ports": [{"port": 80, "$patch": "delete"}, {"port": 81}]}},
        {"spec": {"$setElementOrder/ports": [{"port": 443}, {"port": 80}], "ports": [{"port": 443}]}},
        {"spec": {"selector": {"app": None, "v": "2"}}},
    ]
    return obj, rng.choice(choices)


def fam_pdb(rng, _kind):
    obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x", "tier": "web"}}}}
    choices = [
        {"spec": {"selector": {"matchLabels": {"app": "y"}}}},
        {"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}},
        {"spec": {"maxUnavailable": 1, "minAvailable": None}},
    ]
    return obj, rng.choice(choices)


def fam_status(rng, _kind):
    obj = workload(rng, "Deployment")
    obj["status"] = {"replicas": 2, "conditions": [
        {"type": "Available", "status": "True"}, {"type": "Progressing", "status": "True"}]}
    choices = [
        {"status": {"conditions": [{"type": "ReplicaFailure", "status": "True"}]}},
        {"status": {"conditions": [{"type": "Available", "status": "False"}]}},
        {"status": {"conditions": [{"type": "Progressing", "$patch": "delete"}], "replicas": 3}},
    ]
    return obj, rng.choice(choices)


def fam_sts_claims(rng, _kind):
    obj = workload(rng, "StatefulSet")
    return obj, {"spec": {"volumeClaimTemplates": [{"metadata": {"name": "more"}}]}}


# ----------------------------------------------------- operator-shaped patches

MANAGED = "egress-proxy"
PROXY = ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"]


def our_entry(var, slot):
    if var in ("NO_PROXY", "no_proxy"):
        return {"configMapKeyRef": {"name": MANAGED, "key": "no-proxy"}}
    return {"secretKeyRef": {"name": MANAGED, "key": f"slot.{slot}.{var.lower()}"}}


def replacing(old, new):
    if isinstance(old, dict) and isinstance(new, dict):
        out = {k: replacing(old.get(k), v) for k, v in new.items()}
        for k in old:
            if k not in new:
                out[k] = None
        return out
    return new


def fam_operator(rng, kind):
    """Injection (Override replaces own entries) and cleanup patches as operator/src/workloads sends."""
    obj = workload(rng, kind)
    spec = pod_spec_of(obj)
    slot = rng.choice(["a", "b"])
    tpl_meta = {"annotations": {"egressproxy.io/config-hash": f"h{rng.randint(0, 9)}",
                                "egressproxy.io/credential": f"{MANAGED}/{slot}"}}
    cleanup = rng.random() < 0.5
    if cleanup:
        # put our entries in first, as an earlier injection would have
        for c in spec["containers"] + spec.get("initContainers", []):
            env = [e for e in c.get("env", []) if e["name"] not in PROXY + ["NO_PROXY", "no_proxy"]]
            for v in rng.sample(PROXY + ["NO_PROXY"], rng.randint(1, 5)):
                env.insert(rng.randint(0, len(env)), {"name": v, "valueFrom": our_entry(v, slot)})
            c["env"] = env
        tpl_meta = {"annotations": {"egressproxy.io/config-hash": None, "egressproxy.io/credential": None}}
    patch_spec = {}
    for field in ("containers", "initContainers"):
        items = []
        for c in spec.get(field, []):
            env = c.get("env", [])
            have = {e["name"]: e for e in env}
            out = []
            if cleanup:
                for v in PROXY + ["NO_PROXY", "no_proxy"]:
                    if v in have:
                        if rng.random() < 0.7:
                            out.append({"name": v, "$patch": "delete"})
                        else:
                            old = have[v].get("valueFrom")
                            out.append({"name": v, "value": "http://own:3128", "valueFrom": None if old is None else None})
            else:
                for v in rng.sample(PROXY + ["NO_PROXY"], rng.randint(1, 5)):
                    old = have.get(v, {}).get("valueFrom")
                    out.append({"name": v, "value": None, "valueFrom": replacing(old, our_entry(v, slot))})
            if out:
                items.append({"name": c["name"], "env": out})
        if items:
            patch_spec[field] = items
    return obj, at_pod_spec(kind, patch_spec or None, tpl_meta)


FAMILIES = [
    ("env", fam_env, 70),
    ("env-replace-list", fam_env_replace_list, 10),
    ("set-element-order", fam_set_order, 40),
    ("containers", fam_containers, 35),
    ("volumes", fam_volumes, 25),
    ("ports", fam_ports, 15),
    ("lists", fam_lists_replaced, 25),
    ("meta", fam_meta, 30),
    ("strategy", fam_strategy, 12),
    ("invalid", fam_invalid, 25),
    ("shapes", fam_shapes, 20),
    ("service", fam_service, 8),
    ("pdb", fam_pdb, 4),
    ("status", fam_status, 5),
    ("sts-claims", fam_sts_claims, 2),
    ("operator", fam_operator, 34),
]


def generate():
    rng = random.Random(SEED)
    cases = []
    for fam, fn, n in FAMILIES:
        for i in range(n):
            kind = rng.choice(KINDS)
            obj, patch = fn(rng, kind)
            cases.append({"name": f"{fam}-{i:03}-{obj['kind']}", "original": obj, "patch": patch})
    return cases


# ---------------------------------------------------------------- kubectl


def run_kubectl(kubectl, workdir, case):
    path = os.path.join(workdir, case["name"] + ".json")
    with open(path, "w") as f:
        json.dump(case["original"], f)
    cmd = [kubectl, "patch", "--local", "-f", path, "--type", "strategic",
           "-p", json.dumps(case["patch"]), "-o", "json"]
    answers = []
    for _ in range(2):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if p.returncode == 0:
            answers.append({"expected": json.loads(p.stdout)})
        else:
            msg = p.stderr.strip().replace(path, "ORIG.json")
            answers.append({"error": {"exit": p.returncode, "message": msg}})
    return answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubectl", default=default_kubectl())
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    version = subprocess.run([args.kubectl, "version", "--client", "-o", "json"],
                             capture_output=True, text=True, check=True)
    git_version = json.loads(version.stdout)["clientVersion"]["gitVersion"]
    cases = generate()
    kept, unstable = [], []
    with tempfile.TemporaryDirectory() as workdir, \
            concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_kubectl, args.kubectl, workdir, c) for c in cases]
        for case, fut in zip(cases, futures):
            a, b = fut.result()
            if a != b:
                unstable.append(case["name"])
                continue
            kept.append({**case, **a})
    doc = {
        "about": "Strategic merge patch cases; expectations from kubectl patch --local "
                 "(apimachinery strategicpatch with the built-in types' patch strategies). "
                 "Regenerate: python3 kube-sim/tests/upstream/smp/generate.py",
        "kubectl": git_version,
        "seed": SEED,
        "left_out_unstable": unstable,
        "cases": kept,
    }
    # one case a line: small, and a regeneration diffs case by case
    head = {k: v for k, v in doc.items() if k != "cases"}
    text = json.dumps(head, sort_keys=True, indent=1)[:-2] + ',\n "cases": [\n'
    text += ",\n".join(json.dumps(c, sort_keys=True, separators=(",", ":")) for c in kept)
    with open(args.out, "w") as f:
        f.write(text + "\n ]\n}\n")
    errors = sum(1 for c in kept if "error" in c)
    print(f"{len(kept)} cases ({errors} errors), {len(unstable)} unstable left out, kubectl {git_version}")


if __name__ == "__main__":
    main()
