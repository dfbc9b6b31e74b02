//! The CLI contract of `explain`, `render-no-proxy`, `crd` and `run`'s start-up checks, as later tooling relies on it.

use std::process::{Command, Output};

use serde_json::Value;

const SENTINEL: &str = "Sentinel-Pw-7f3a9";

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_egress-proxy-operator"));
    cmd.args(args).env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run egress-proxy-operator")
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn all_text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn explain_one_dialect_has_the_documented_shape() {
    let proxy = format!("http://user:{SENTINEL}@proxy.corp.example:3128");
    let out = run(
        &[
            "explain",
            "--dialect",
            "go",
            "--output",
            "json",
            "--env",
            &format!("HTTPS_PROXY={proxy}"),
            "--env",
            "NO_PROXY=.svc,.corp.example",
            "https://api.example.com/",
        ],
        &[],
    );
    let v = json(&out);
    let keys: Vec<&str> = v
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    for key in [
        "dialect", "url", "decision", "proxy", "matched", "variable", "reason",
    ] {
        assert!(keys.contains(&key), "missing {key} in {v}");
    }
    assert_eq!(v["dialect"], "go");
    assert_eq!(v["decision"], "proxy");
    assert_eq!(v["proxy"], "http://user:***@proxy.corp.example:3128");
    assert!(!all_text(&out).contains(SENTINEL));

    let v = json(&run(
        &[
            "explain",
            "--dialect",
            "go",
            "--output",
            "json",
            "--env",
            &format!("HTTPS_PROXY={proxy}"),
            "--env",
            "NO_PROXY=.svc,.corp.example",
            "https://git.corp.example/",
        ],
        &[],
    ));
    assert_eq!(v["decision"], "direct");
    assert_eq!(v["matched"], ".corp.example");
    assert_eq!(v["variable"], "NO_PROXY");
    assert_eq!(v["proxy"], Value::Null);
}

#[test]
fn explain_all_lists_every_dialect_in_order() {
    let v = json(&run(
        &[
            "explain",
            "--output",
            "json",
            "--dialect",
            "all",
            "--env",
            "http_proxy=http://proxy:3128",
            "http://example.com/",
        ],
        &[],
    ));
    let names: Vec<&str> = v
        .as_array()
        .expect("array")
        .iter()
        .map(|d| d["dialect"].as_str().expect("dialect name"))
        .collect();
    assert_eq!(
        names,
        [
            "portable",
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
            "java"
        ]
    );
    for d in v.as_array().expect("array") {
        let decision = d["decision"].as_str().expect("decision");
        assert!(["direct", "proxy", "error"].contains(&decision), "{d}");
    }
}

#[test]
fn env_flags_replace_the_process_environment() {
    let process_env = [
        ("HTTP_PROXY", "http://from-process:3128"),
        ("http_proxy", "http://from-process:3128"),
    ];
    // Without --env the command's own environment is used.
    let v = json(&run(
        &[
            "explain",
            "--dialect",
            "python-urllib",
            "--output",
            "json",
            "http://example.com/",
        ],
        &process_env,
    ));
    assert_eq!(v["decision"], "proxy");
    assert_eq!(v["proxy"], "http://from-process:3128");
    // With --env, exactly those pairs: the process's proxy is gone.
    let v = json(&run(
        &[
            "explain",
            "--dialect",
            "python-urllib",
            "--output",
            "json",
            "--env",
            "NO_PROXY=other.example",
            "http://example.com/",
        ],
        &process_env,
    ));
    assert_eq!(v["decision"], "direct");
    assert_eq!(v["proxy"], Value::Null);
}

#[test]
fn credentials_never_appear_in_any_output() {
    let bad_urls = [
        format!("http://user:{SENTINEL}@proxy.corp.example:3128"),
        format!("http://user:{SENTINEL}@[::1"),
        format!("user:{SENTINEL}@proxy.corp.example:3128"),
        format!("http://user:{SENTINEL}@pro xy:31"),
        format!("http://{SENTINEL}@proxy:3128"),
        // Unencoded spaces and @ in the password: still userinfo.
        format!("http://user:{SENTINEL} word@proxy.corp.example:3128"),
        format!("http://user:pw {SENTINEL}@proxy.corp.example:3128"),
        format!("http://user:{SENTINEL}@x@proxy.corp.example:3128/"),
        format!("http://tok {SENTINEL}@proxy:3128"),
    ];
    for proxy in &bad_urls {
        for output in ["text", "json"] {
            let out = run(
                &[
                    "explain",
                    "--output",
                    output,
                    "--env",
                    &format!("HTTP_PROXY={proxy}"),
                    "--env",
                    &format!("http_proxy={proxy}"),
                    "--env",
                    &format!("HTTPS_PROXY={proxy}"),
                    "--env",
                    "NO_PROXY=localhost",
                    "http://example.com/",
                ],
                &[],
            );
            assert!(
                !all_text(&out).contains(SENTINEL),
                "{proxy} leaked in {output} output: {}",
                all_text(&out)
            );
        }
    }
}

#[test]
fn render_json_has_value_uncovered_and_warnings() {
    let v = json(&run(
        &[
            "render-no-proxy",
            "--dialect",
            "python-urllib",
            "--output",
            "json",
            ".corp.example",
            "10.20.0.0/16",
            "Registry.Internal.",
            "registry.internal",
        ],
        &[],
    ));
    // Each name also with a trailing dot: python-urllib compares names literally.
    assert_eq!(
        v["value"],
        "corp.example,corp.example.,registry.internal,registry.internal."
    );
    let uncovered = v["uncovered"].as_array().expect("uncovered");
    assert_eq!(uncovered.len(), 1, "{v}");
    assert_eq!(uncovered[0]["entry"], "10.20.0.0/16");
    assert!(
        uncovered[0]["reason"]
            .as_str()
            .expect("reason")
            .contains("CIDR")
    );
    assert!(v["warnings"].is_array());
}

#[test]
fn render_text_prints_the_value_and_accepts_comma_lists() {
    let out = run(
        &[
            "render-no-proxy",
            "--dialect",
            "go",
            "10.0.0.0/9,10.128.0.0/9",
            ".svc",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", all_text(&out));
    // `.svc` means svc and its subdomains; Go spells that `svc` (and `svc.` for names
    // written with a trailing dot). The two halves aggregate.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "svc,svc.,10.0.0.0/8"
    );
}

#[test]
fn malformed_entries_fail_with_the_entry_named() {
    for (entry, why) in [
        ("10.0.0.0/33", "33"),
        ("http://proxy.corp.example", "URL"),
        ("a b", "a b"),
        ("bücher.example", "bücher.example"),
    ] {
        let out = run(
            &["render-no-proxy", "--dialect", "curl", ".svc", entry],
            &[],
        );
        assert!(!out.status.success(), "{entry} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(entry) && err.contains(why), "{entry}: {err}");
    }
}

#[test]
fn crd_prints_the_committed_file() {
    let out = run(&["crd"], &[]);
    assert!(out.status.success());
    let committed = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../crds/egressproxypolicies.egressproxy.io.yaml"),
    )
    .expect("read crds/");
    assert_eq!(out.stdout, committed);
}

#[test]
fn run_rejects_bad_flags_before_touching_a_cluster() {
    for (args, expected) in [
        (
            &["run", "--service-cidr", "10.43.0.0/33"][..],
            "is not a CIDR",
        ),
        (&["run", "--pod-cidr", "pods"][..], "is not a CIDR"),
        (
            &["run", "--cluster-domain", "bad domain"][..],
            "is not a DNS domain",
        ),
        (&["run", "--log-level", "=="][..], "invalid --log-level"),
        (
            &["run", "--kubeconfig", "/nonexistent/kubeconfig"][..],
            "reading kubeconfig /nonexistent/kubeconfig",
        ),
    ] {
        let out = run(args, &[]);
        assert!(!out.status.success(), "{args:?} succeeded");
        let text = all_text(&out);
        assert!(text.contains(expected), "{args:?}: {text}");
    }
}

#[test]
fn run_fails_fast_without_the_crd_and_on_a_bad_namespace_selector() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let sim = rt
        .block_on(kube_sim::KubeSim::start(kube_sim::Config::default()))
        .expect("kube-sim");
    let dir = std::env::temp_dir().join(format!("epo-cli-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let kc = dir.join("kubeconfig");
    sim.write_kubeconfig(&kc).expect("kubeconfig");
    let kc = kc.to_string_lossy().into_owned();

    let out = run(&["run", "--kubeconfig", &kc], &[]);
    assert!(!out.status.success());
    assert!(
        all_text(&out).contains("is the CRD installed?"),
        "{}",
        all_text(&out)
    );

    sim.apply_yaml(&egress_proxy_operator::api::crd_yaml().expect("crd"))
        .expect("crd");
    let out = run(
        &[
            "run",
            "--kubeconfig",
            &kc,
            "--namespace-selector",
            "a in (b",
        ],
        &[],
    );
    assert!(!out.status.success());
    assert!(
        all_text(&out).contains("namespace selector \"a in (b\" is not valid"),
        "{}",
        all_text(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
