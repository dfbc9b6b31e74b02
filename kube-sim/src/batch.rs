//! batch/v1 Job and CronJob on write: the defaults, generated selector and labels, and
//! validation a real API server applies. (CronJobs are stored, never scheduled.)

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::object::meta_str;
use crate::selectors::LabelSelector;

pub(crate) const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
pub(crate) const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const LEGACY_JOB_NAME: &str = "job-name";

/// Default, label and validate a Job being created (`old` None) or updated.
pub(crate) fn normalize_job(obj: &mut Value, old: Option<&Value>) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let uid = meta_str(obj, "uid").unwrap_or_default().to_string();
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    defaults(&mut obj["spec"]);
    let manual = obj.pointer("/spec/manualSelector") == Some(&json!(true));
    if old.is_none() && !manual {
        generate_selector(&mut obj["spec"], &name, &uid);
    }
    let mut causes = validate(&obj["spec"], manual, &name, &uid);
    if let Some(old) = old {
        causes.extend(immutable(
            &obj["spec"],
            old.get("spec").unwrap_or(&json!({})),
        ));
    }
    if causes.is_empty() {
        return Ok(());
    }
    let causes: Vec<(&str, String)> = causes.iter().map(|(f, m)| (*f, m.clone())).collect();
    Err(ApiError::invalid("Job.batch", &name, &causes))
}

/// Default and validate a CronJob: its own defaults, a schedule, and a job template whose
/// Pods can run to completion. Nothing schedules it: no Job is ever created from it.
pub(crate) fn normalize_cron_job(obj: &mut Value) -> ApiResult<()> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    if let Some(s) = obj["spec"].as_object_mut() {
        for (k, v) in [
            ("concurrencyPolicy", json!("Allow")),
            ("suspend", json!(false)),
            ("successfulJobsHistoryLimit", json!(3)),
            ("failedJobsHistoryLimit", json!(1)),
        ] {
            s.entry(k).or_insert(v);
        }
    }
    let spec = &obj["spec"];
    let mut causes: Vec<(&str, String)> = Vec::new();
    if spec
        .get("schedule")
        .and_then(Value::as_str)
        .is_none_or(|s| s.trim().is_empty())
    {
        causes.push(("spec.schedule", "Required value".to_string()));
    }
    let pod = spec.pointer("/jobTemplate/spec/template/spec");
    let containers = pod
        .and_then(|p| p.get("containers"))
        .and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        let f = "spec.jobTemplate.spec.template.spec.containers";
        causes.push((f, "Required value".to_string()));
    }
    let policy = pod
        .and_then(|p| p.get("restartPolicy"))
        .and_then(Value::as_str);
    if !matches!(policy, Some("OnFailure" | "Never")) {
        let f = "spec.jobTemplate.spec.template.spec.restartPolicy";
        let shown = policy.unwrap_or_default();
        let m =
            format!("Unsupported value: \"{shown}\": supported values: \"OnFailure\", \"Never\"");
        causes.push((f, m));
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid("CronJob.batch", &name, &causes))
}

fn defaults(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else {
        return;
    };
    if !s.contains_key("completions") && !s.contains_key("parallelism") {
        s.insert("completions".into(), json!(1));
    }
    for (k, v) in [
        ("parallelism", json!(1)),
        ("backoffLimit", json!(6)),
        ("completionMode", json!("NonIndexed")),
        ("suspend", json!(false)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        s.entry(k).or_insert(v);
    }
}

/// The labels and selector the real server generates when `manualSelector` is not true.
fn generate_selector(spec: &mut Value, name: &str, uid: &str) {
    let labels = &mut spec["template"]["metadata"]["labels"];
    if !labels.is_object() {
        *labels = json!({});
    }
    if let Some(l) = labels.as_object_mut() {
        for (k, v) in [
            (LEGACY_JOB_NAME, name),
            (JOB_NAME, name),
            (LEGACY_CONTROLLER_UID, uid),
            (CONTROLLER_UID, uid),
        ] {
            l.entry(k).or_insert(json!(v));
        }
    }
    let matching = &mut spec["selector"]["matchLabels"];
    if !matching.is_object() {
        *matching = json!({});
    }
    if let Some(m) = matching.as_object_mut() {
        m.entry(CONTROLLER_UID).or_insert(json!(uid));
    }
}

fn labels_of(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

fn selector_of(spec: &Value) -> Option<LabelSelector> {
    let sel = spec.get("selector").filter(|s| s.is_object())?;
    LabelSelector::parse(&crate::selectors::selector_string(sel)).ok()
}

fn validate(spec: &Value, manual: bool, name: &str, uid: &str) -> Vec<(&'static str, String)> {
    let mut causes = Vec::new();
    for (field, path) in [
        ("spec.parallelism", "/parallelism"),
        ("spec.completions", "/completions"),
        ("spec.activeDeadlineSeconds", "/activeDeadlineSeconds"),
        ("spec.backoffLimit", "/backoffLimit"),
        ("spec.ttlSecondsAfterFinished", "/ttlSecondsAfterFinished"),
    ] {
        if let Some(n) = spec.pointer(path).and_then(Value::as_i64)
            && n < 0
        {
            let m = format!("Invalid value: {n}: must be greater than or equal to 0");
            causes.push((field, m));
        }
    }
    let template_labels = labels_of(spec.pointer("/template/metadata/labels"));
    match selector_of(spec) {
        None => causes.push(("spec.selector", "Required value".to_string())),
        Some(sel) => {
            if !sel.matches_labels(&template_labels) {
                let m = "Invalid value: `selector` does not match template `labels`";
                causes.push(("spec.template.metadata.labels", m.to_string()));
            }
            let generated = BTreeMap::from([
                (LEGACY_CONTROLLER_UID.to_string(), uid.to_string()),
                (CONTROLLER_UID.to_string(), uid.to_string()),
                (LEGACY_JOB_NAME.to_string(), name.to_string()),
                (JOB_NAME.to_string(), name.to_string()),
            ]);
            if !manual && !sel.matches_labels(&generated) {
                let m = "Invalid value: `selector` not auto-generated";
                causes.push(("spec.selector", m.to_string()));
            }
        }
    }
    let containers = spec
        .pointer("/template/spec/containers")
        .and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        causes.push((
            "spec.template.spec.containers",
            "Required value".to_string(),
        ));
    }
    let policy = spec
        .pointer("/template/spec/restartPolicy")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match policy {
        "OnFailure" | "Never" => {}
        "" | "Always" => causes.push((
            "spec.template.spec.restartPolicy",
            "Required value: valid values: \"OnFailure\", \"Never\"".to_string(),
        )),
        other => causes.push((
            "spec.template.spec.restartPolicy",
            format!("Unsupported value: \"{other}\": supported values: \"OnFailure\", \"Never\""),
        )),
    }
    causes
}

/// Fields a Job cannot change after creation.
fn immutable(spec: &Value, old: &Value) -> Vec<(&'static str, String)> {
    let mut causes = Vec::new();
    for (field, key) in [
        ("spec.selector", "selector"),
        ("spec.template", "template"),
        ("spec.completions", "completions"),
        ("spec.completionMode", "completionMode"),
    ] {
        let new = spec.get(key).and_then(crate::object::canonical);
        if new != old.get(key).and_then(crate::object::canonical) {
            let shown = new.map(|v| v.to_string()).unwrap_or_else(|| "null".into());
            causes.push((field, format!("Invalid value: {shown}: field is immutable")));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(policy: &str) -> Value {
        json!({"metadata": {"name": "j", "uid": "u1"},
               "spec": {"template": {"spec": {"restartPolicy": policy,
                                              "containers": [{"name": "c", "image": "i"}]}}}})
    }

    fn cron_job() -> Value {
        json!({"metadata": {"name": "nightly"},
               "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                   "restartPolicy": "OnFailure",
                   "containers": [{"name": "c", "image": "i"}]}}}}}})
    }

    #[test]
    fn cron_job_defaults_and_validation() {
        let mut c = cron_job();
        normalize_cron_job(&mut c).expect("valid");
        let s = &c["spec"];
        assert_eq!(s["concurrencyPolicy"], json!("Allow"));
        assert_eq!(s["suspend"], json!(false));
        assert_eq!(
            (
                &s["successfulJobsHistoryLimit"],
                &s["failedJobsHistoryLimit"]
            ),
            (&json!(3), &json!(1))
        );
        let mut bad = cron_job();
        bad["spec"]["schedule"] = json!("");
        bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        let e = normalize_cron_job(&mut bad).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("spec.schedule: Required value"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("restartPolicy: Unsupported value: \"Always\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn defaults_and_generated_selector() {
        let mut j = job("Never");
        normalize_job(&mut j, None).expect("valid");
        let s = &j["spec"];
        assert_eq!(
            (&s["completions"], &s["parallelism"], &s["backoffLimit"]),
            (&json!(1), &json!(1), &json!(6))
        );
        assert_eq!(s["suspend"], json!(false));
        assert_eq!(s["completionMode"], json!("NonIndexed"));
        assert_eq!(
            s["selector"],
            json!({"matchLabels": {CONTROLLER_UID: "u1"}})
        );
        let l = &s["template"]["metadata"]["labels"];
        assert_eq!(l[JOB_NAME], json!("j"));
        assert_eq!(l["job-name"], json!("j"));
        assert_eq!(l["controller-uid"], json!("u1"));
    }

    #[test]
    fn parallelism_alone_leaves_completions_unset() {
        let mut j = job("Never");
        j["spec"]["parallelism"] = json!(3);
        normalize_job(&mut j, None).expect("valid");
        assert!(j["spec"].get("completions").is_none());
    }

    #[test]
    fn restart_policy_must_be_never_or_on_failure() {
        let e = normalize_job(&mut job(""), None).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.ends_with(
                "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
            ),
            "{}",
            e.message
        );
        let e = normalize_job(&mut job("Sometimes"), None).unwrap_err();
        assert!(
            e.message.contains("Unsupported value: \"Sometimes\""),
            "{}",
            e.message
        );
        assert!(normalize_job(&mut job("OnFailure"), None).is_ok());
    }

    #[test]
    fn template_is_immutable() {
        let mut old = job("Never");
        normalize_job(&mut old, None).expect("valid");
        let mut new = old.clone();
        normalize_job(&mut new, Some(&old)).expect("unchanged is fine");
        new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
        let e = normalize_job(&mut new, Some(&old)).unwrap_err();
        assert!(
            e.message.contains("spec.template: Invalid value"),
            "{}",
            e.message
        );
        assert!(e.message.ends_with("field is immutable"), "{}", e.message);
    }

    #[test]
    fn a_hand_written_selector_needs_manual_selector() {
        let mut j = job("Never");
        j["spec"]["selector"] = json!({"matchLabels": {"app": "x"}});
        j["spec"]["template"]["metadata"] = json!({"labels": {"app": "x"}});
        let e = normalize_job(&mut j.clone(), None).unwrap_err();
        assert!(
            e.message.contains("`selector` not auto-generated"),
            "{}",
            e.message
        );
        j["spec"]["manualSelector"] = json!(true);
        normalize_job(&mut j, None).expect("manual selector");
    }
}
