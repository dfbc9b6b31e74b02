//! The configMap, secret and emptyDir volumes of executed Pods, simulated. The kubelet's files
//! are written under the Pod's scratch directory (`volumes/NAME/...`); a local process has no
//! mount namespace, so each mount path is rewritten to that directory wherever it starts a
//! path in the container's environment and command line.

use std::collections::BTreeMap;
use std::path::{Component, Path};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{Value, json};

use super::super::{gr, name, namespace, str_at, target, uid};
use crate::api;
use crate::object::{Target, now};
use crate::store::Store;

/// The directory under a Pod's scratch directory that holds its volumes.
pub(super) const DIR: &str = "volumes";
/// The kubelet's file mode for configMap and secret volumes without `defaultMode`.
const DEFAULT_MODE: u32 = 0o644;
const FAILED_MOUNT: &str = "FailedMount";

/// One file of a volume, relative to the volume's directory.
#[derive(Debug, PartialEq)]
pub(super) struct VolumeFile {
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// A volume kube-sim sets up: a directory named after it holding its files.
#[derive(Debug)]
pub(super) struct Volume {
    pub name: String,
    pub files: Vec<VolumeFile>,
}

/// What a Pod volume is made from.
enum Source<'a> {
    ConfigMap(&'a Value),
    Secret(&'a Value),
    EmptyDir,
    /// A type kube-sim does not simulate (its field name).
    Other(String),
}

fn source(v: &Value) -> Source<'_> {
    if let Some(s) = v.get("configMap") {
        Source::ConfigMap(s)
    } else if let Some(s) = v.get("secret") {
        Source::Secret(s)
    } else if v.get("emptyDir").is_some() {
        Source::EmptyDir
    } else {
        let mut keys = v.as_object().into_iter().flatten().map(|(k, _)| k);
        let ty = keys.find(|k| *k != "name").cloned();
        Source::Other(ty.unwrap_or_else(|| "of no type".into()))
    }
}

fn pod_volume_list(pod: &Value) -> impl Iterator<Item = &Value> {
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// One path component that stays inside its directory.
fn safe_name(n: &str) -> bool {
    !n.is_empty() && n != "." && n != ".." && !n.contains('/')
}

/// A relative path without `..`, as the API server requires of item paths and subPaths.
fn relative(p: &str) -> bool {
    !p.is_empty()
        && Path::new(p)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

fn mode_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64).map(|m| (m & 0o777) as u32)
}

/// A ConfigMap's `data` (as text) and `binaryData`, or a Secret's `data`, as bytes.
fn entries(obj: &Value, secret: bool) -> BTreeMap<String, Vec<u8>> {
    let b64 = |v: &Value| {
        let s = v.as_str().unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .unwrap_or_default()
    };
    let text = |v: &Value| v.as_str().unwrap_or_default().as_bytes().to_vec();
    let fields: &[(&str, bool)] = if secret {
        &[("data", true)]
    } else {
        &[("binaryData", true), ("data", false)]
    };
    let mut out = BTreeMap::new();
    for (field, binary) in fields {
        for (k, v) in obj
            .get(*field)
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let bytes = if *binary { b64(v) } else { text(v) };
            out.insert(k.clone(), bytes);
        }
    }
    out
}

/// The files of a configMap or secret volume `src` whose object is `obj` (None: missing), or
/// why the kubelet cannot set it up (its message after `MountVolume.SetUp failed ... : `).
fn files(secret: bool, src: &Value, obj: Option<&Value>) -> Result<Vec<VolumeFile>, String> {
    let optional = src.get("optional").and_then(Value::as_bool) == Some(true);
    let Some(obj) = obj else {
        let (kind, field) = if secret {
            ("secret", "/secretName")
        } else {
            ("configmap", "/name")
        };
        return match optional {
            true => Ok(Vec::new()),
            false => Err(format!("{kind} \"{}\" not found", str_at(src, field))),
        };
    };
    let data = entries(obj, secret);
    let default = mode_of(src.get("defaultMode")).unwrap_or(DEFAULT_MODE);
    let items = src.get("items").and_then(Value::as_array);
    let Some(items) = items.filter(|a| !a.is_empty()) else {
        let all = data.into_iter().map(|(path, data)| VolumeFile {
            path,
            data,
            mode: default,
        });
        return Ok(all.collect());
    };
    let mut out = Vec::new();
    for item in items {
        let key = str_at(item, "/key");
        let Some(bytes) = data.get(&key) else {
            match (optional, secret) {
                (true, _) => continue,
                (false, true) => return Err(format!("references non-existent secret key: {key}")),
                (false, false) => {
                    return Err(format!(
                        "configmap references non-existent config key: {key}"
                    ));
                }
            }
        };
        out.push(VolumeFile {
            path: str_at(item, "/path"),
            data: bytes.clone(),
            mode: mode_of(item.get("mode")).unwrap_or(default),
        });
    }
    Ok(out)
}

/// The files of a configMap (`secret` false) or secret volume source in namespace `ns`.
fn object_files(
    store: &Store,
    ns: &str,
    secret: bool,
    src: &Value,
) -> Result<Vec<VolumeFile>, String> {
    let (plural, field) = match secret {
        true => ("secrets", "/secretName"),
        false => ("configmaps", "/name"),
    };
    let obj = store.get(&gr("", plural), &(ns.to_string(), str_at(src, field)));
    files(secret, src, obj.as_deref())
}

/// The volumes kube-sim sets up for a Pod (configMap, secret, emptyDir; others are left out,
/// and a container mounting one is refused by `mounts`), or the kubelet's FailedMount message.
pub(super) fn pod_volumes(store: &Store, pod: &Value) -> Result<Vec<Volume>, String> {
    let ns = namespace(pod);
    let mut out = Vec::new();
    for v in pod_volume_list(pod) {
        let vname = str_at(v, "/name");
        let failed =
            |why: String| format!("MountVolume.SetUp failed for volume \"{vname}\" : {why}");
        let files = match source(v) {
            Source::ConfigMap(s) => object_files(store, &ns, false, s),
            Source::Secret(s) => object_files(store, &ns, true, s),
            Source::EmptyDir => Ok(Vec::new()),
            Source::Other(_) => continue,
        };
        let files = files.map_err(failed)?;
        if !safe_name(&vname) {
            return Err(failed("kube-sim: not a valid volume name".into()));
        }
        if let Some(f) = files.iter().find(|f| !relative(&f.path)) {
            let why = format!("kube-sim: path {:?} must be relative, without '..'", f.path);
            return Err(failed(why));
        }
        out.push(Volume { name: vname, files });
    }
    Ok(out)
}

/// A container's mounts as (mount path, the path under `dir` standing for it), or the
/// kubelet's CreateContainerConfigError message. `vars` expand `subPathExpr`.
pub(super) fn mounts(
    pod: &Value,
    c: &Value,
    vars: &BTreeMap<String, String>,
    dir: &Path,
) -> Result<Vec<(String, String)>, String> {
    let container = str_at(c, "/name");
    let list = c.get("volumeMounts").and_then(Value::as_array);
    let mut out = Vec::new();
    for m in list.into_iter().flatten() {
        let vname = str_at(m, "/name");
        let at = str_at(m, "/mountPath");
        let at = at.trim_end_matches('/');
        if !at.starts_with('/') {
            let why = format!("kube-sim cannot mount volume {vname:?} at {at:?}");
            return Err(format!(
                "{why}: it simulates mounts under an absolute path other than /"
            ));
        }
        let Some(v) = pod_volume_list(pod).find(|v| str_at(v, "/name") == vname) else {
            return Err(format!(
                "cannot find volume {vname:?} to mount into container {container:?}"
            ));
        };
        if let Source::Other(ty) = source(v) {
            return Err(format!(
                "kube-sim simulates only configMap, secret and emptyDir volumes; volume \
                 {vname:?} mounted into container {container:?} is {ty}"
            ));
        }
        let sub = match str_at(m, "/subPathExpr") {
            e if e.is_empty() => str_at(m, "/subPath"),
            e => super::super::env::expand(&e, vars),
        };
        if !safe_name(&vname) || (!sub.is_empty() && !relative(&sub)) {
            return Err(format!(
                "failed to prepare subPath for volumeMount {vname:?} of container {container:?}"
            ));
        }
        let mut to = dir.join(&vname);
        if !sub.is_empty() {
            to.push(&sub);
        }
        out.push((at.to_string(), to.to_string_lossy().into_owned()));
    }
    Ok(out)
}

/// A character that continues a file name (so `/m` in `/mx` or `/m.d` is not the path `/m`).
fn name_char(c: char) -> bool {
    c.is_alphanumeric() || "._-~+@%".contains(c)
}

/// A path may start after `before`: at the start, after a delimiter, or after `scheme://`.
fn starts_path(before: &str) -> bool {
    match before.chars().next_back() {
        None => true,
        Some('/') => before.ends_with("://"),
        Some(c) => !name_char(c),
    }
}

/// `rest` begins with the path `m` itself or something inside it.
fn is_path_prefix(rest: &str, m: &str) -> bool {
    rest.strip_prefix(m).is_some_and(|after| {
        after
            .chars()
            .next()
            .is_none_or(|c| c == '/' || !name_char(c))
    })
}

/// `s` with every path that is a mount path or lies under one (`/m`, `/m/f`; not `/mx` nor
/// `/a/m`) rewritten to what the mount stands for; the longest mount path wins.
pub(super) fn rewrite(s: &str, mounts: &[(String, String)]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(ch) = s[i..].chars().next() {
        let found = starts_path(&s[..i])
            .then(|| {
                let fit = mounts.iter().filter(|(m, _)| is_path_prefix(&s[i..], m));
                fit.max_by_key(|(m, _)| m.len())
            })
            .flatten();
        match found {
            Some((m, to)) => {
                out.push_str(to);
                i += m.len();
            }
            None => {
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    out
}

/// Write the volumes into `dir`, which only kube-sim's user may enter (Secrets land there).
/// Files lose their write bits: the kubelet mounts these volumes read-only.
pub(super) fn write(dir: &Path, volumes: &[Volume]) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let private = |e: std::io::Error| format!("kube-sim: creating {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(private)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(private)?;
    for v in volumes {
        let root = dir.join(&v.name);
        let failed =
            |e: std::io::Error| format!("MountVolume.SetUp failed for volume \"{}\" : {e}", v.name);
        std::fs::create_dir_all(&root).map_err(failed)?;
        for f in &v.files {
            let path = root.join(&f.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(failed)?;
            }
            let _ = std::fs::remove_file(&path);
            std::fs::write(&path, &f.data).map_err(failed)?;
            let mode = std::fs::Permissions::from_mode(f.mode & 0o555);
            std::fs::set_permissions(&path, mode).map_err(failed)?;
        }
    }
    Ok(())
}

/// The kubelet's Warning Event `FailedMount` on the Pod, once per distinct message (a real
/// kubelet repeats it on each retry, counting).
pub(super) fn record_failed_mount(store: &mut Store, pod: &Value, message: &str) {
    let (ns, pod_name, pod_uid) = (namespace(pod), name(pod), uid(pod));
    let seen = store
        .range(&gr("", "events"), Some(&ns), None)
        .any(|(_, e)| {
            str_at(&e, "/involvedObject/uid") == pod_uid
                && str_at(&e, "/reason") == FAILED_MOUNT
                && str_at(&e, "/message") == message
        });
    let Some(t) = target(store, "", "events", &ns, None).filter(|_| !seen) else {
        return;
    };
    let node = str_at(pod, "/spec/nodeName");
    let (ts, nanos) = (now(), SystemTime::now().duration_since(UNIX_EPOCH));
    let ev = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": { "name": format!("{pod_name}.{:x}", nanos.unwrap_or_default().as_nanos()),
                      "namespace": ns },
        "involvedObject": { "apiVersion": "v1", "kind": "Pod", "namespace": ns,
            "name": pod_name, "uid": pod_uid,
            "resourceVersion": str_at(pod, "/metadata/resourceVersion") },
        "reason": FAILED_MOUNT, "message": message, "type": "Warning",
        "source": { "component": "kubelet", "host": node },
        "firstTimestamp": ts, "lastTimestamp": ts, "count": 1,
        "reportingComponent": "kubelet", "reportingInstance": node,
    });
    let t = Target {
        manager: Some("kubelet".into()),
        ..t
    };
    if let Err(e) = api::create(store, &t, ev, false) {
        tracing::warn!(error = %e, "kubelet: recording FailedMount");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn only_whole_paths_under_a_mount_are_rewritten() {
        let mounts = m(&[("/etc/t", "/tmp/p/v"), ("/etc/t/sub", "/tmp/p/w")]);
        let r = |s: &str| rewrite(s, &mounts);
        assert_eq!(r("/etc/t/ca.crt"), "/tmp/p/v/ca.crt");
        assert_eq!(r("/etc/t"), "/tmp/p/v");
        assert_eq!(r("/etc/t/sub/x"), "/tmp/p/w/x", "the longest mount wins");
        assert_eq!(r("--ca=/etc/t/a:/etc/t/b"), "--ca=/tmp/p/v/a:/tmp/p/v/b");
        assert_eq!(
            r("cat '/etc/t/a' \"/etc/t\""),
            "cat '/tmp/p/v/a' \"/tmp/p/v\""
        );
        assert_eq!(r("file:///etc/t/a"), "file:///tmp/p/v/a");
        for same in [
            "/etc/tx",
            "/etc/t.d/a",
            "/etc/t-old",
            "/opt/etc/t/a",
            "x/etc/t",
            "//etc/t",
        ] {
            assert_eq!(r(same), same);
        }
        assert_eq!(r("é/etc/t ü"), "é/etc/t ü", "a letter continues a name");
        assert_eq!(r("ü /etc/t"), "ü /tmp/p/v");
    }

    #[test]
    fn configmap_items_binary_data_and_modes() {
        let cm = json!({"data": {"a": "text", "b": "unused"}, "binaryData": {"bin": "AP8="}});
        let src = json!({"name": "cm", "defaultMode": 0o600,
            "items": [{"key": "a", "path": "dir/a.txt"}, {"key": "bin", "path": "bin", "mode": 0o400}]});
        let got = files(false, &src, Some(&cm)).expect("files");
        let want = [
            VolumeFile {
                path: "dir/a.txt".into(),
                data: b"text".to_vec(),
                mode: 0o600,
            },
            VolumeFile {
                path: "bin".into(),
                data: vec![0, 255],
                mode: 0o400,
            },
        ];
        assert_eq!(got, want);
        let all = files(false, &json!({"name": "cm"}), Some(&cm)).expect("all");
        let paths: Vec<_> = all.iter().map(|f| (f.path.as_str(), f.mode)).collect();
        assert_eq!(paths, [("a", 0o644), ("b", 0o644), ("bin", 0o644)]);
    }

    #[test]
    fn missing_objects_and_keys_fail_unless_optional() {
        let cm = json!({"name": "cm", "items": [{"key": "k", "path": "k"}]});
        assert_eq!(
            files(false, &cm, None),
            Err("configmap \"cm\" not found".into())
        );
        assert_eq!(
            files(false, &cm, Some(&json!({"data": {}}))),
            Err("configmap references non-existent config key: k".into())
        );
        let secret = json!({"secretName": "s", "items": [{"key": "k", "path": "k"}]});
        assert_eq!(
            files(true, &secret, None),
            Err("secret \"s\" not found".into())
        );
        assert_eq!(
            files(true, &secret, Some(&json!({"data": {}}))),
            Err("references non-existent secret key: k".into())
        );
        let optional =
            json!({"secretName": "s", "optional": true, "items": [{"key": "k", "path": "k"}]});
        assert_eq!(files(true, &optional, None), Ok(Vec::new()));
        assert_eq!(files(true, &optional, Some(&json!({}))), Ok(Vec::new()));
        let all = files(
            true,
            &json!({"secretName": "s"}),
            Some(&json!({"data": {"t": "dDA="}})),
        );
        assert_eq!(all.expect("secret")[0].data, b"t0");
    }

    #[test]
    fn mounts_map_sub_paths_and_refuse_what_is_not_simulated() {
        let pod = json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": "cm"}},
            {"name": "h", "hostPath": {"path": "/"}}]}});
        let dir = Path::new("/tmp/p/volumes");
        let vars = BTreeMap::from([("F".to_string(), "f".to_string())]);
        let c = json!({"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/etc/v/"},
            {"name": "v", "mountPath": "/etc/f", "subPathExpr": "sub/$(F)"}]});
        assert_eq!(
            mounts(&pod, &c, &vars, dir),
            Ok(m(&[
                ("/etc/v", "/tmp/p/volumes/v"),
                ("/etc/f", "/tmp/p/volumes/v/sub/f")
            ]))
        );
        let refused = |mount: Value| {
            let c = json!({"name": "c", "volumeMounts": [mount]});
            mounts(&pod, &c, &vars, dir).expect_err("refused")
        };
        assert!(refused(json!({"name": "h", "mountPath": "/h"})).contains("is hostPath"));
        assert_eq!(
            refused(json!({"name": "x", "mountPath": "/x"})),
            "cannot find volume \"x\" to mount into container \"c\""
        );
        assert!(refused(json!({"name": "v", "mountPath": "/"})).contains("other than /"));
        let up = refused(json!({"name": "v", "mountPath": "/x", "subPath": "../x"}));
        assert!(up.starts_with("failed to prepare subPath"));
    }
}
