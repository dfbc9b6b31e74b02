//! kube-sim's strategic merge patch against apimachinery's: replays the cases in
//! `tests/upstream/smp-cases.json` (original, patch, and what `kubectl patch --local` made of
//! them: the object, list order included, or a refusal). Regenerate the file with
//! `python3 kube-sim/tests/upstream/smp/generate.py`.

use kube_sim::{PatchKind, apply_patch, strategic_merge_patch};
use serde_json::Value;

const CASES: &str = include_str!("../upstream/smp-cases.json");

/// What kube-sim made of a case, when it differs from upstream.
fn mismatch(case: &Value) -> Option<String> {
    let got = strategic_merge_patch(&case["original"], &case["patch"]);
    if let Some(m) = served_differs(case, got.as_ref().ok()) {
        return Some(m);
    }
    match (got, case.get("expected"), case.get("error")) {
        (Ok(got), Some(want), _) if &got == want => None,
        (Ok(got), Some(want), _) => Some(first_diff(want, &got, String::new())),
        (Err(_), None, Some(_)) => None,
        (Err(e), Some(_), _) => Some(format!(
            "refused ({}: {}), upstream accepts",
            e.code, e.message
        )),
        (Ok(got), None, err) => Some(format!(
            "accepted, upstream refuses ({})\n  got {got}",
            err.map(|e| e["message"].to_string()).unwrap_or_default()
        )),
        (Err(_), None, None) => Some("case has neither expected nor error".into()),
    }
}

/// The PATCH endpoint's answer (`apply_patch`) is the same object without nulls (the API
/// server decodes the merge result into the typed object).
fn served_differs(case: &Value, exact: Option<&Value>) -> Option<String> {
    let body = case["patch"].to_string();
    let served = apply_patch(PatchKind::Strategic, &case["original"], body.as_bytes()).ok();
    let want = exact.cloned().map(|mut v| {
        drop_nulls(&mut v);
        v
    });
    (served != want).then(|| format!("apply_patch gives {served:?}, want {want:?}"))
}

/// Where `got` first departs from `want`: a JSON pointer and both values there.
fn first_diff(want: &Value, got: &Value, at: String) -> String {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            let keys = w.keys().chain(g.keys().filter(|k| !w.contains_key(*k)));
            for k in keys {
                let (wv, gv) = (
                    w.get(k).unwrap_or(&Value::Null),
                    g.get(k).unwrap_or(&Value::Null),
                );
                if wv != gv || w.contains_key(k) != g.contains_key(k) {
                    return first_diff(wv, gv, format!("{at}/{k}"));
                }
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            if let Some(i) = (0..w.len()).find(|i| w[*i] != g[*i]) {
                return first_diff(&w[i], &g[i], format!("{at}/{i}"));
            }
        }
        _ => {}
    }
    format!("at {at}:\n  want {want}\n  got  {got}")
}

fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[test]
fn strategic_merge_matches_kubectl() {
    let doc: Value = serde_json::from_str(CASES).expect("smp-cases.json parses");
    let cases = doc["cases"].as_array().expect("cases");
    let failures: Vec<(String, String)> = cases
        .iter()
        .filter_map(|c| mismatch(c).map(|m| (c["name"].as_str().unwrap_or("?").to_owned(), m)))
        .collect();
    println!(
        "{}/{} strategic-merge cases match (kubectl {})",
        cases.len() - failures.len(),
        cases.len(),
        doc["kubectl"].as_str().unwrap_or("?")
    );
    for (name, diff) in failures.iter().take(8) {
        println!("MISMATCH {name}: {diff}");
    }
    assert!(
        failures.is_empty(),
        "{} cases differ from upstream",
        failures.len()
    );
}
