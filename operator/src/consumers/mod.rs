//! The other consumers of a policy's proxy settings, rendered from the same NO_PROXY intents
//! the operator computes for workloads: a systemd drop-in for a node daemon (containerd,
//! CRI-O, Docker, kubelet), the template of the file that holds the proxy credentials, a
//! shell snippet for an operator's terminal and the env block of a CI job.
//!
//! Pure: no I/O. Credentials never pass through here: every output points at a file or at
//! the CI system's secrets, and the template has placeholders only.

mod quote;

use anyhow::{Context, bail, ensure};
use clap::ValueEnum;
use kube::ResourceExt;

use crate::api::EgressProxyPolicy;
use crate::api::reasons::READY;
use crate::discovery;
use crate::noproxy::{Dialect, IntentSet, Rendered, Widen, render_with};
pub use quote::{shell_quote, systemd_quote, yaml_string};

/// Where credentials live when no `--proxy-env-file` is given.
pub const DEFAULT_ENV_FILE: &str = "/etc/egress-proxy/proxy.env";

/// The NO_PROXY intents to render, and where they come from.
#[derive(Clone, Debug)]
pub struct Facts {
    /// For the header: `EgressProxyPolicy shop/outbound` or `--no-proxy`.
    pub origin: String,
    pub set: IntentSet,
    pub widen: Widen,
}

impl Facts {
    /// The NO_PROXY value and what it leaves out, in `dialect`.
    pub fn render(&self, dialect: Dialect) -> Rendered {
        render_with(dialect, &self.set, self.widen)
    }
}

/// The facts of a policy as the operator last computed them: `status.discovered` and
/// `spec.noProxy` give the intents by the operator's own code
/// ([`discovery::policy_intents`]); rendered in the policy's dialect they must give
/// `status.noProxy` back, or the status is not the current one.
pub fn policy_facts(p: &EgressProxyPolicy) -> anyhow::Result<Facts> {
    let origin = format!(
        "EgressProxyPolicy {}/{}",
        p.namespace().unwrap_or_default(),
        p.name_any()
    );
    let status = p.status.as_ref();
    let Some(value) = status.and_then(|s| s.no_proxy.as_deref()) else {
        bail!(
            "{origin} has no computed NO_PROXY (status.noProxy is not set){}: render once \
             the operator has reconciled it, or give the entries with --no-proxy",
            not_ready(p)
        );
    };
    let observed = status.and_then(|s| s.observed_generation);
    if let (Some(observed), Some(current)) = (observed, p.metadata.generation) {
        ensure!(
            observed == current,
            "{origin}: status.noProxy is of generation {observed}, the policy is at \
             generation {current}: render once the operator has reconciled it"
        );
    }
    let facts = status.and_then(|s| s.discovered.as_ref()).with_context(|| {
        format!("{origin} has status.noProxy but no status.discovered: the facts it was computed from")
    })?;
    let spec = &p.spec.no_proxy;
    let intents = discovery::policy_intents(facts, spec).map_err(|e| {
        anyhow::anyhow!(
            "{origin}: the NO_PROXY entries cannot be computed from status.discovered: {}: {}",
            e.reason,
            e.message
        )
    })?;
    let f = Facts {
        origin: origin.clone(),
        set: IntentSet::new(intents),
        widen: spec.widen,
    };
    ensure!(
        f.render(spec.dialect.for_variables()).value == value,
        "{origin}: status.noProxy is not what status.discovered and spec.noProxy give in \
         dialect {} (a status written by another operator version, or not yet updated): \
         render once the operator has reconciled it, or give the entries with --no-proxy",
        spec.dialect
    );
    Ok(f)
}

/// ` (Ready is False: Reason: message)` when the policy says why it is not ready.
fn not_ready(p: &EgressProxyPolicy) -> String {
    let conditions = p.status.iter().flat_map(|s| &s.conditions);
    match conditions.into_iter().find(|c| c.type_ == READY) {
        Some(c) if c.status != "True" => {
            format!(" (Ready is {}: {}: {})", c.status, c.reason, c.message)
        }
        _ => String::new(),
    }
}

/// A node daemon that reads the proxy variables from its environment. All four are Go
/// programs: NO_PROXY is written in the `go` dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Daemon {
    /// containerd (image pulls of the CRI).
    Containerd,
    /// CRI-O (image pulls of the CRI).
    Crio,
    /// Docker Engine (dockerd: image pulls, `docker build` and `docker run` defaults).
    Docker,
    /// The kubelet (credential providers, cloud APIs; the API server must stay direct).
    Kubelet,
}

impl Daemon {
    /// The systemd unit name without `.service`.
    pub fn unit(self) -> &'static str {
        match self {
            Daemon::Containerd => "containerd",
            Daemon::Crio => "crio",
            Daemon::Docker => "docker",
            Daemon::Kubelet => "kubelet",
        }
    }

    /// Where the drop-in is installed.
    pub fn dropin_path(self) -> String {
        format!(
            "/etc/systemd/system/{}.service.d/http-proxy.conf",
            self.unit()
        )
    }

    /// What a restart of the daemon does to what runs on the node.
    fn restart_note(self) -> &'static str {
        match self {
            Daemon::Containerd => {
                "Running containers keep running across a containerd restart (their shims are \
                 separate processes)."
            }
            Daemon::Crio => {
                "Running containers keep running across a CRI-O restart (conmon monitors \
                 them)."
            }
            Daemon::Docker => {
                "A dockerd restart stops its running containers unless \"live-restore\": true \
                 is set in /etc/docker/daemon.json: drain the node first."
            }
            Daemon::Kubelet => "Running Pods keep running across a kubelet restart.",
        }
    }
}

/// `# ` before each line (`#` alone for an empty one).
fn comments(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| match l.is_empty() {
            true => "#\n".to_owned(),
            false => format!("# {l}\n"),
        })
        .collect()
}

/// What the value leaves out and the warnings, as comment lines.
fn notes(r: &Rendered, dialect: Dialect) -> Vec<String> {
    let mut lines = Vec::new();
    let (ignored, left_out): (Vec<_>, Vec<_>) =
        r.uncovered.iter().partition(|u| !u.clients.is_empty());
    if !left_out.is_empty() {
        lines.push(format!(
            "Not in NO_PROXY (dialect {dialect} cannot express them; requests to them use the proxy):"
        ));
        lines.extend(
            left_out
                .iter()
                .map(|u| format!("  {}: {}", u.entry, u.reason)),
        );
    }
    if !ignored.is_empty() {
        lines
            .push("In NO_PROXY, but ignored by some clients (they use the proxy for them):".into());
        lines.extend(
            ignored
                .iter()
                .map(|u| format!("  {}: {}", u.entry, u.reason)),
        );
    }
    lines.extend(r.warnings.iter().map(|w| format!("Warning: {w}")));
    lines
}

/// An absolute path to a credentials file, as the outputs reference it.
pub fn check_env_file(path: &str) -> anyhow::Result<()> {
    ensure!(
        path.starts_with('/'),
        "--proxy-env-file {path:?}: must be an absolute path"
    );
    ensure!(
        !path.chars().any(|c| c.is_control() || c.is_whitespace()),
        "--proxy-env-file {path:?}: blanks and control characters are not supported"
    );
    Ok(())
}

/// The systemd drop-in that gives `daemon` the proxy: the credentials through
/// `EnvironmentFile=` (never inline), NO_PROXY and no_proxy in Go syntax.
pub fn systemd_dropin(
    daemon: Daemon,
    facts: &Facts,
    env_file: &str,
) -> anyhow::Result<(String, Rendered)> {
    check_env_file(env_file)?;
    let r = facts.render(Dialect::Go);
    let unit = daemon.unit();
    let mut head = vec![
        format!("egress-proxy-operator render systemd --daemon {unit}"),
        format!(
            "NO_PROXY from {}, in Go syntax ({unit} is a Go program).",
            facts.origin
        ),
        String::new(),
        format!("Install as {} (root, mode 0644),", daemon.dropin_path()),
        "then apply it: it takes effect only when the daemon restarts.".to_owned(),
        format!("  systemctl daemon-reload && systemctl restart {unit}"),
        daemon.restart_note().to_owned(),
        format!("HTTP_PROXY and HTTPS_PROXY, with the credentials, are read from {env_file}"),
        "(root, mode 0600), which must exist: write it from the template of".to_owned(),
        "  egress-proxy-operator render env-file".to_owned(),
    ];
    head.extend(notes(&r, Dialect::Go));
    let value = systemd_quote(&r.value)?;
    let out = format!(
        "{}[Service]\nEnvironmentFile={}\nEnvironment=\"NO_PROXY={value}\" \"no_proxy={value}\"\n",
        comments(&head),
        env_file.replace('%', "%%"),
    );
    Ok((out, r))
}

/// Placeholder of a proxy URL in the template.
const PLACEHOLDER: &str = "http://USER:PASSWORD@PROXY-HOST:PORT";

/// The template of the credentials file the drop-ins and the shell snippet read: the keys
/// with placeholders, never values.
pub fn env_file_template(env_file: &str) -> anyhow::Result<String> {
    check_env_file(env_file)?;
    let head = [
        "egress-proxy-operator render env-file: the proxy URLs, with credentials.".to_owned(),
        format!("Install as {env_file} (root, mode 0600) and replace the placeholders."),
        "Read by the systemd drop-ins (EnvironmentFile=) and the shell snippet. One".to_owned(),
        "NAME=value per line, no quotes, no blanks; percent-encode the user and password"
            .to_owned(),
        "(@ is %40, : is %3A, % is %25, / is %2F).".to_owned(),
    ];
    let keys = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"];
    let body: String = keys
        .iter()
        .map(|k| format!("{k}={PLACEHOLDER}\n"))
        .collect();
    Ok(format!("{}{body}", comments(&head)))
}

/// A POSIX shell snippet for an operator's terminal, to be sourced: exports NO_PROXY and
/// no_proxy in `dialect`, and the four proxy variables read from `env_file` when sourced
/// (the credentials are neither in the snippet nor on a command line).
pub fn shell_snippet(
    dialect: Dialect,
    facts: &Facts,
    env_file: &str,
) -> anyhow::Result<(String, Rendered)> {
    check_env_file(env_file)?;
    let r = facts.render(dialect);
    let mut head = vec![
        format!("egress-proxy-operator render shell --dialect {dialect}"),
        format!("NO_PROXY from {}, dialect {dialect}.", facts.origin),
        "Source it in a POSIX shell (. ./egress-proxy.sh); do not run it. The proxy".to_owned(),
        format!("URLs, with credentials, are read from {env_file} each time."),
    ];
    head.extend(notes(&r, dialect));
    let body = format!(
        "export NO_PROXY={value}\n\
         export no_proxy=\"$NO_PROXY\"\n\
         egress_proxy_file={file}\n\
         if [ -r \"$egress_proxy_file\" ]; then\n\
         \x20   while IFS= read -r egress_proxy_line || [ -n \"$egress_proxy_line\" ]; do\n\
         \x20       case $egress_proxy_line in\n\
         \x20           HTTP_PROXY=*|HTTPS_PROXY=*|http_proxy=*|https_proxy=*) export \"$egress_proxy_line\" ;;\n\
         \x20       esac\n\
         \x20   done < \"$egress_proxy_file\"\n\
         else\n\
         \x20   echo \"egress-proxy: cannot read $egress_proxy_file: HTTP_PROXY and HTTPS_PROXY not set\" >&2\n\
         fi\n\
         unset egress_proxy_file egress_proxy_line\n",
        value = shell_quote(&r.value),
        file = shell_quote(env_file),
    );
    Ok((format!("{}{body}", comments(&head)), r))
}

/// The CI system an env block is written for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CiFormat {
    /// GitHub Actions: an `env:` block; the proxy URLs from the secrets HTTP_PROXY and
    /// HTTPS_PROXY.
    Github,
    /// GitLab CI/CD: a `variables:` block; the proxy URLs from the masked CI/CD variables
    /// HTTP_PROXY and HTTPS_PROXY.
    Gitlab,
}

/// The env block of a CI job: NO_PROXY and no_proxy in `dialect`, the proxy URLs as
/// references to the CI system's secrets, never values.
pub fn ci_env(format: CiFormat, dialect: Dialect, facts: &Facts) -> (String, Rendered) {
    let r = facts.render(dialect);
    let value = yaml_string(&r.value);
    let (mut head, block, refs) = match format {
        CiFormat::Github => (
            vec![
                "GitHub Actions: the env of a workflow, job or step.".to_owned(),
                "HTTP_PROXY and HTTPS_PROXY are repository or organization secrets of".to_owned(),
                "those names (Settings > Secrets and variables > Actions).".to_owned(),
            ],
            "env",
            [
                ("HTTP_PROXY", "${{ secrets.HTTP_PROXY }}"),
                ("HTTPS_PROXY", "${{ secrets.HTTPS_PROXY }}"),
                ("http_proxy", "${{ secrets.HTTP_PROXY }}"),
                ("https_proxy", "${{ secrets.HTTPS_PROXY }}"),
            ]
            .as_slice(),
        ),
        CiFormat::Gitlab => (
            vec![
                "GitLab CI/CD: the variables of the pipeline or of a job.".to_owned(),
                "HTTP_PROXY and HTTPS_PROXY are masked CI/CD variables of the project or"
                    .to_owned(),
                "group (Settings > CI/CD > Variables), which GitLab gives every job.".to_owned(),
            ],
            "variables",
            [
                ("http_proxy", "$HTTP_PROXY"),
                ("https_proxy", "$HTTPS_PROXY"),
            ]
            .as_slice(),
        ),
    };
    head.insert(
        0,
        format!(
            "egress-proxy-operator render ci --format {} --dialect {dialect}",
            format_name(format)
        ),
    );
    head.insert(
        1,
        format!("NO_PROXY from {}, dialect {dialect}.", facts.origin),
    );
    head.extend(notes(&r, dialect));
    let mut out = format!("{}{block}:\n", comments(&head));
    out.push_str(&format!("  NO_PROXY: {value}\n  no_proxy: {value}\n"));
    for (k, v) in refs {
        out.push_str(&format!("  {k}: {v}\n"));
    }
    (out, r)
}

fn format_name(f: CiFormat) -> &'static str {
    match f {
        CiFormat::Github => "github",
        CiFormat::Gitlab => "gitlab",
    }
}

#[cfg(test)]
mod tests;
