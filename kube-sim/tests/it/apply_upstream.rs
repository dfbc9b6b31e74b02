//! kube-sim's server-side apply held to upstream structured-merge-diff: plays every case of
//! upstream/ssa-cases.json against kube-sim over HTTP and compares the object, each
//! manager's fields and conflict vs success with upstream/ssa-expected.json, the output of
//! the reference program upstream/ssa/main.go (the library's merge.Updater). When `go` and
//! Debian's golang-k8s-sigs-structured-merge-diff-dev are installed, the reference program is
//! built and run first and its output must equal the committed expectations.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use kube::api::{Api, Patch, PatchParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube_sim::{Config, KubeSim};
use serde_json::Value;

const CASES: &str = include_str!("../upstream/ssa-cases.json");
const EXPECTED: &str = include_str!("../upstream/ssa-expected.json");

fn upstream_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream")
}

/// The reference program's output, when Go and the library are installed.
fn run_reference() -> Option<Result<Value, String>> {
    let lib = Path::new("/usr/share/gocode/src/sigs.k8s.io/structured-merge-diff/merge");
    let go = Command::new("go").arg("version").output();
    if !lib.is_dir() || !go.is_ok_and(|o| o.status.success()) {
        return None;
    }
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let bin = tmp.join("ssa-reference");
    let dir = upstream_dir().join("ssa");
    let build = Command::new("bash")
        .arg(dir.join("build.sh"))
        .arg(&bin)
        .env("GOCACHE", tmp.join("ssa-gocache"))
        .output();
    match build {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Some(Err(String::from_utf8_lossy(&o.stderr).into_owned())),
        Err(e) => return Some(Err(e.to_string())),
    }
    let run = || -> std::io::Result<std::process::Output> {
        let mut child = Command::new(&bin)
            .arg(dir.join("schema.yaml"))
            .stdin(std::fs::File::open(upstream_dir().join("ssa-cases.json"))?)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        child.stdin.take();
        child.wait_with_output()
    };
    Some(match run() {
        Ok(o) if o.status.success() => serde_json::from_slice(&o.stdout).map_err(|e| e.to_string()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => Err(e.to_string()),
    })
}

/// Numbers compared as numbers (32 == 32.0), everything else structurally, lists in order.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// A FieldsV1 as sorted paths, `k:` keys re-encoded so both sides spell them alike.
fn paths(fields: &Value) -> BTreeSet<String> {
    fn walk(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        let Some(m) = v.as_object() else { return };
        if m.is_empty() && !prefix.is_empty() {
            out.insert(prefix.to_string());
        }
        for (k, child) in m {
            if k == "." {
                out.insert(prefix.to_string());
                continue;
            }
            let el = match k.strip_prefix("k:") {
                Some(key) => match serde_json::from_str::<Value>(key) {
                    Ok(v) => format!("k:{v}"),
                    Err(_) => k.clone(),
                },
                None => k.clone(),
            };
            walk(child, &format!("{prefix}/{el}"), out);
        }
    }
    let mut out = BTreeSet::new();
    walk(fields, "", &mut out);
    out
}

/// What a step came to, in the reference program's terms.
#[derive(Debug)]
enum Outcome {
    Ok {
        object: Value,
        managed: BTreeMap<String, BTreeSet<String>>,
    },
    Conflicts(BTreeSet<(String, String)>),
    /// Refused; the message is only shown (upstream's and kube-sim's wording differ).
    Error(#[allow(dead_code)] String),
}

fn expected_outcome(step: &Value) -> Outcome {
    if let Some(cs) = step.get("conflicts").and_then(Value::as_array) {
        let set = cs
            .iter()
            .map(|c| {
                (
                    c["manager"].as_str().unwrap_or_default().to_string(),
                    c["field"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        return Outcome::Conflicts(set);
    }
    if let Some(e) = step.get("error") {
        return Outcome::Error(e.to_string());
    }
    let managed = step["managed"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(m, f)| (m.clone(), paths(f)))
        .collect();
    Outcome::Ok {
        object: step["object"].clone(),
        managed,
    }
}

/// Fields kube-sim sets itself (server metadata, status, defaulting): dropped from the object
/// unless the expectation has them.
fn server_set(actual: &mut Value, expected: &Value) {
    if let Some(m) = actual.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "namespace",
        ] {
            m.remove(k);
        }
    }
    if let Some(m) = actual.as_object_mut() {
        m.remove("status");
    }
    let defaulted = [
        "/spec/replicas",
        "/spec/revisionHistoryLimit",
        "/spec/progressDeadlineSeconds",
        "/spec/strategy",
    ];
    for p in defaulted {
        if expected.pointer(p).is_none()
            && let Some((parent, key)) = p.rsplit_once('/')
            && let Some(m) = actual.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            m.remove(key);
        }
    }
}

fn actual_outcome(result: Result<DynamicObject, kube::Error>, expected: &Value) -> Outcome {
    let obj = match result {
        Ok(o) => serde_json::to_value(o).expect("object as JSON"),
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let causes = s.details.map(|d| d.causes).unwrap_or_default();
            let set = causes
                .iter()
                .map(|c| {
                    let name = c.message.split('"').nth(1).unwrap_or_default();
                    let op = if c.message.contains(" using ") {
                        "Update"
                    } else {
                        "Apply"
                    };
                    (format!("{name}/{op}"), c.field.clone())
                })
                .collect();
            return Outcome::Conflicts(set);
        }
        Err(e) => return Outcome::Error(e.to_string()),
    };
    let managed = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let key = format!(
                "{}/{}",
                e["manager"].as_str().unwrap_or_default(),
                e["operation"].as_str().unwrap_or_default()
            );
            (key, paths(&e["fieldsV1"]))
        })
        .collect();
    let mut object = obj;
    server_set(&mut object, expected.get("object").unwrap_or(&Value::Null));
    Outcome::Ok { object, managed }
}

/// Differences between the expected and the actual outcome, one line each.
fn mismatches(want: &Outcome, got: &Outcome) -> Vec<String> {
    match (want, got) {
        (
            Outcome::Ok {
                object: wo,
                managed: wm,
            },
            Outcome::Ok {
                object: go,
                managed: gm,
            },
        ) => {
            let mut out = Vec::new();
            if !same(wo, go) {
                out.push(format!("object:\n      upstream {wo}\n      kube-sim {go}"));
            }
            let managers: BTreeSet<&String> = wm.keys().chain(gm.keys()).collect();
            for m in managers {
                let (w, g) = (
                    wm.get(m).cloned().unwrap_or_default(),
                    gm.get(m).cloned().unwrap_or_default(),
                );
                let missing: Vec<_> = w.difference(&g).collect();
                let extra: Vec<_> = g.difference(&w).collect();
                if !missing.is_empty() || !extra.is_empty() {
                    out.push(format!(
                        "fields of {m}: kube-sim lacks {missing:?}, has extra {extra:?}"
                    ));
                }
            }
            out
        }
        (Outcome::Conflicts(w), Outcome::Conflicts(g)) if w == g => Vec::new(),
        (Outcome::Error(_), Outcome::Error(_)) => Vec::new(),
        (w, g) => vec![format!("upstream {w:?}\n      kube-sim {g:?}")],
    }
}

fn api_for(client: &kube::Client, obj: &Value) -> Api<DynamicObject> {
    let (group, version) = match obj["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            obj["apiVersion"].as_str().unwrap_or_default().to_string(),
        ),
    };
    let kind = obj["kind"].as_str().unwrap_or_default();
    let plural = format!("{}s", kind.to_lowercase());
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &version, kind), &plural);
    match kind {
        "CustomResourceDefinition" => Api::all_with(client.clone(), &ar),
        _ => Api::namespaced_with(client.clone(), "default", &ar),
    }
}

async fn play(
    api: &Api<DynamicObject>,
    name: &str,
    step: &Value,
) -> Result<DynamicObject, kube::Error> {
    let manager = step["manager"].as_str().unwrap_or_default();
    match step["op"].as_str() {
        Some("apply") => {
            let mut pp = PatchParams::apply(manager);
            pp.force = step["force"].as_bool().unwrap_or(false);
            api.patch(name, &pp, &Patch::Apply(&step["object"])).await
        }
        _ => {
            let pp = PatchParams {
                field_manager: Some(manager.to_string()),
                ..PatchParams::default()
            };
            api.patch(name, &pp, &Patch::Merge(&step["patch"])).await
        }
    }
}

#[tokio::test]
async fn apply_matches_structured_merge_diff() {
    let started = Instant::now();
    let committed: Value = serde_json::from_str(EXPECTED).expect("ssa-expected.json");
    let expected = match run_reference() {
        None => {
            println!(
                "reference program not run (go or golang-k8s-sigs-structured-merge-diff-dev missing): using the committed expectations"
            );
            committed
        }
        Some(Err(e)) => panic!("the reference program failed: {e}"),
        Some(Ok(fresh)) => {
            assert_eq!(
                fresh, committed,
                "kube-sim/tests/upstream/ssa-expected.json is stale: run kube-sim/tests/upstream/ssa/regen.sh"
            );
            println!("reference program run: its output equals the committed expectations");
            fresh
        }
    };
    let cases: Value = serde_json::from_str(CASES).expect("ssa-cases.json");
    let sim = KubeSim::start(Config::default())
        .await
        .expect("start kube-sim");
    let client = sim.client().expect("client");
    let (mut total, mut matched, mut report) = (0, 0, Vec::new());
    let (mut cases_total, mut cases_matched) = (0, 0);
    for (case, want) in cases["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .zip(expected["cases"].as_array().expect("expected cases"))
    {
        let first = &case["steps"][0]["object"];
        let api = api_for(&client, first);
        let name = first["metadata"]["name"].as_str().expect("name");
        let before = report.len();
        for (i, (step, want_step)) in case["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .zip(want["steps"].as_array().expect("expected steps"))
            .enumerate()
        {
            total += 1;
            let got = actual_outcome(play(&api, name, step).await, want_step);
            let diffs = mismatches(&expected_outcome(want_step), &got);
            if diffs.is_empty() {
                matched += 1;
                continue;
            }
            report.push(format!(
                "{} step {i} ({} by {}):\n    {}",
                case["name"],
                step["op"],
                step["manager"],
                diffs.join("\n    ")
            ));
        }
        cases_total += 1;
        cases_matched += usize::from(report.len() == before);
    }
    let summary =
        format!("{cases_matched}/{cases_total} apply cases match ({matched}/{total} steps)");
    println!("{summary} in {} ms", started.elapsed().as_millis());
    assert!(
        report.is_empty(),
        "{summary}; mismatches:\n{}",
        report.join("\n")
    );
}
