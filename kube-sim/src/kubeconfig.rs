//! The kubeconfig written for clients.

use std::io::Write;
use std::path::Path;

/// Token of the admin user in the written kubeconfig.
pub const ADMIN_TOKEN: &str = "kube-sim-admin-token";

pub fn render(server_url: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: kube-sim
  cluster:
    server: {server_url}
users:
- name: kube-sim-admin
  user:
    token: {ADMIN_TOKEN}
contexts:
- name: kube-sim
  context:
    cluster: kube-sim
    user: kube-sim-admin
    namespace: default
current-context: kube-sim
preferences: {{}}
"
    )
}

/// Write atomically (temp file + rename) so readers never see a partial file.
pub fn write(path: &Path, server_url: &str) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "kubeconfig".into());
    let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(render(server_url).as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
