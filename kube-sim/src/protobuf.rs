//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`), decoded into
//! the JSON the rest of the server works with. Typed clients (kubectl's `create secret`,
//! `auth can-i`, ...) send them. The envelope is the magic `k8s\0` and a `runtime.Unknown`
//! holding the type and the encoded object; each supported kind is described by a table of
//! field numbers (from the upstream `generated.proto` files), so adding a kind is adding a
//! table. A field no table knows is refused (415) rather than dropped.

use base64::Engine;
use serde_json::{Map, Value, json};

/// What a field holds.
#[derive(Clone, Copy)]
enum T {
    /// A string; Go's encoder writes empty ones too, which JSON omits.
    Str,
    /// A `*bool`: false is a value.
    Bool,
    /// A plain `bool` with `omitempty`: always encoded, false is omitted.
    Flag,
    /// A `*int32`/`*int64`: 0 is a value.
    Int,
    /// A plain integer with `omitempty`: always encoded, 0 is omitted.
    Count,
    Time,
    Msg(&'static [F]),
    StrList,
    MsgList(&'static [F]),
    StrMap,
    BytesMap,
    /// `map<string, ExtraValue>`: a list of strings per key.
    ListMap,
    /// `map<string, Quantity>`: a Quantity is a message with its string in field 1.
    QuantityMap,
    /// Known, carries nothing a request may set (`status`): skipped.
    Ignore,
}

/// One field: number, JSON name, type.
struct F(u32, &'static str, T);

const OWNER_REF: &[F] = &[
    F(5, "apiVersion", T::Str),
    F(1, "kind", T::Str),
    F(3, "name", T::Str),
    F(4, "uid", T::Str),
    F(6, "controller", T::Bool),
    F(7, "blockOwnerDeletion", T::Bool),
];

const OBJECT_META: &[F] = &[
    F(1, "name", T::Str),
    F(2, "generateName", T::Str),
    F(3, "namespace", T::Str),
    F(5, "uid", T::Str),
    F(6, "resourceVersion", T::Str),
    F(7, "generation", T::Count),
    F(8, "creationTimestamp", T::Time),
    F(9, "deletionTimestamp", T::Time),
    F(10, "deletionGracePeriodSeconds", T::Int),
    F(11, "labels", T::StrMap),
    F(12, "annotations", T::StrMap),
    F(13, "ownerReferences", T::MsgList(OWNER_REF)),
    F(14, "finalizers", T::StrList),
    F(4, "selfLink", T::Ignore),
    F(17, "managedFields", T::Ignore),
];

const RESOURCE_ATTRIBUTES: &[F] = &[
    F(1, "namespace", T::Str),
    F(2, "verb", T::Str),
    F(3, "group", T::Str),
    F(4, "version", T::Str),
    F(5, "resource", T::Str),
    F(6, "subresource", T::Str),
    F(7, "name", T::Str),
];

const NON_RESOURCE_ATTRIBUTES: &[F] = &[F(1, "path", T::Str), F(2, "verb", T::Str)];

const ACCESS_REVIEW_SPEC: &[F] = &[
    F(1, "resourceAttributes", T::Msg(RESOURCE_ATTRIBUTES)),
    F(2, "nonResourceAttributes", T::Msg(NON_RESOURCE_ATTRIBUTES)),
    F(3, "user", T::Str),
    F(4, "groups", T::StrList),
    F(5, "extra", T::ListMap),
    F(6, "uid", T::Str),
];

const ACCESS_REVIEW: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "spec", T::Msg(ACCESS_REVIEW_SPEC)),
    F(3, "status", T::Ignore),
];

const RULES_REVIEW: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "spec", T::Msg(&[F(1, "namespace", T::Str)])),
    F(3, "status", T::Ignore),
];

const SECRET: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "data", T::BytesMap),
    F(3, "type", T::Str),
    F(4, "stringData", T::StrMap),
    F(5, "immutable", T::Bool),
];

const CONFIG_MAP: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "data", T::StrMap),
    F(3, "binaryData", T::BytesMap),
    F(4, "immutable", T::Bool),
];

const NAMESPACE: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "spec", T::Msg(&[F(1, "finalizers", T::StrList)])),
    F(3, "status", T::Ignore),
];

const OBJECT_REFERENCE: &[F] = &[
    F(1, "kind", T::Str),
    F(2, "namespace", T::Str),
    F(3, "name", T::Str),
    F(4, "uid", T::Str),
    F(5, "apiVersion", T::Str),
];

const SERVICE_ACCOUNT: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "secrets", T::MsgList(OBJECT_REFERENCE)),
    F(3, "imagePullSecrets", T::MsgList(&[F(1, "name", T::Str)])),
    F(4, "automountServiceAccountToken", T::Bool),
];

const TOKEN_REQUEST: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(
        2,
        "spec",
        T::Msg(&[
            F(1, "audiences", T::StrList),
            F(4, "expirationSeconds", T::Int),
            F(
                3,
                "boundObjectRef",
                T::Msg(&[
                    F(1, "kind", T::Str),
                    F(2, "apiVersion", T::Str),
                    F(3, "name", T::Str),
                    F(4, "uid", T::Str),
                ]),
            ),
        ]),
    ),
    F(3, "status", T::Ignore),
];

const LABEL_SELECTOR: &[F] = &[
    F(1, "matchLabels", T::StrMap),
    F(
        2,
        "matchExpressions",
        T::MsgList(&[
            F(1, "key", T::Str),
            F(2, "operator", T::Str),
            F(3, "values", T::StrList),
        ]),
    ),
];

const CONTAINER: &[F] = &[
    F(1, "name", T::Str),
    F(2, "image", T::Str),
    F(3, "command", T::StrList),
    F(4, "args", T::StrList),
    F(5, "workingDir", T::Str),
    F(
        6,
        "ports",
        T::MsgList(&[
            F(1, "name", T::Str),
            F(2, "hostPort", T::Count),
            F(3, "containerPort", T::Int),
            F(4, "protocol", T::Str),
            F(5, "hostIP", T::Str),
        ]),
    ),
    F(
        7,
        "env",
        T::MsgList(&[F(1, "name", T::Str), F(2, "value", T::Str)]),
    ),
    F(
        8,
        "resources",
        T::Msg(&[
            F(1, "limits", T::QuantityMap),
            F(2, "requests", T::QuantityMap),
        ]),
    ),
    F(13, "terminationMessagePath", T::Str),
    F(14, "imagePullPolicy", T::Str),
    F(20, "terminationMessagePolicy", T::Str),
    F(16, "stdin", T::Flag),
    F(17, "stdinOnce", T::Flag),
    F(18, "tty", T::Flag),
];

const POD_TEMPLATE: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(
        2,
        "spec",
        T::Msg(&[
            F(2, "containers", T::MsgList(CONTAINER)),
            F(20, "initContainers", T::MsgList(CONTAINER)),
            F(3, "restartPolicy", T::Str),
            F(4, "terminationGracePeriodSeconds", T::Int),
            F(6, "dnsPolicy", T::Str),
            F(7, "nodeSelector", T::StrMap),
            F(8, "serviceAccountName", T::Str),
            F(19, "schedulerName", T::Str),
            F(5, "activeDeadlineSeconds", T::Int),
            F(9, "serviceAccount", T::Str),
            F(10, "nodeName", T::Str),
            F(11, "hostNetwork", T::Flag),
            F(12, "hostPID", T::Flag),
            F(13, "hostIPC", T::Flag),
            F(16, "hostname", T::Str),
            F(17, "subdomain", T::Str),
            F(21, "automountServiceAccountToken", T::Bool),
            F(24, "priorityClassName", T::Str),
            F(25, "priority", T::Int),
            F(27, "shareProcessNamespace", T::Bool),
            F(29, "runtimeClassName", T::Str),
            F(30, "enableServiceLinks", T::Bool),
            F(31, "preemptionPolicy", T::Str),
            F(35, "setHostnameAsFQDN", T::Bool),
            F(37, "hostUsers", T::Bool),
            F(41, "hostnameOverride", T::Str),
        ]),
    ),
];

const DEPLOYMENT: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(
        2,
        "spec",
        T::Msg(&[
            F(1, "replicas", T::Int),
            F(2, "selector", T::Msg(LABEL_SELECTOR)),
            F(3, "template", T::Msg(POD_TEMPLATE)),
            F(4, "strategy", T::Msg(&[F(1, "type", T::Str)])),
            F(5, "minReadySeconds", T::Count),
            F(6, "revisionHistoryLimit", T::Int),
            F(7, "paused", T::Flag),
            F(9, "progressDeadlineSeconds", T::Int),
        ]),
    ),
    F(3, "status", T::Ignore),
];

const JOB: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(
        2,
        "spec",
        T::Msg(&[
            F(1, "parallelism", T::Int),
            F(2, "completions", T::Int),
            F(3, "activeDeadlineSeconds", T::Int),
            F(4, "selector", T::Msg(LABEL_SELECTOR)),
            F(5, "manualSelector", T::Bool),
            F(6, "template", T::Msg(POD_TEMPLATE)),
            F(7, "backoffLimit", T::Int),
            F(8, "ttlSecondsAfterFinished", T::Int),
            F(9, "completionMode", T::Str),
            F(10, "suspend", T::Bool),
        ]),
    ),
    F(3, "status", T::Ignore),
];

const POLICY_RULE: &[F] = &[
    F(1, "verbs", T::StrList),
    F(2, "apiGroups", T::StrList),
    F(3, "resources", T::StrList),
    F(4, "resourceNames", T::StrList),
    F(5, "nonResourceURLs", T::StrList),
];

const ROLE: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(2, "rules", T::MsgList(POLICY_RULE)),
];

const ROLE_BINDING: &[F] = &[
    F(1, "metadata", T::Msg(OBJECT_META)),
    F(
        2,
        "subjects",
        T::MsgList(&[
            F(1, "kind", T::Str),
            F(2, "apiGroup", T::Str),
            F(3, "name", T::Str),
            F(4, "namespace", T::Str),
        ]),
    ),
    F(
        3,
        "roleRef",
        T::Msg(&[
            F(1, "apiGroup", T::Str),
            F(2, "kind", T::Str),
            F(3, "name", T::Str),
        ]),
    ),
];

/// The kinds whose protobuf bodies are understood, by `apiVersion` and `kind`.
const DELETE_OPTIONS: &[F] = &[
    F(1, "gracePeriodSeconds", T::Int),
    F(
        2,
        "preconditions",
        T::Msg(&[F(1, "uid", T::Str), F(2, "resourceVersion", T::Str)]),
    ),
    F(3, "orphanDependents", T::Bool),
    F(4, "propagationPolicy", T::Str),
    F(5, "dryRun", T::StrList),
    F(
        6,
        "ignoreStoreReadErrorWithClusterBreakingPotential",
        T::Bool,
    ),
];

const KINDS: &[(&str, &str, &[F])] = &[
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SubjectAccessReview",
        ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "LocalSubjectAccessReview",
        ACCESS_REVIEW,
    ),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        RULES_REVIEW,
    ),
    ("v1", "Secret", SECRET),
    ("v1", "ConfigMap", CONFIG_MAP),
    ("v1", "Namespace", NAMESPACE),
    ("v1", "ServiceAccount", SERVICE_ACCOUNT),
    ("authentication.k8s.io/v1", "TokenRequest", TOKEN_REQUEST),
    ("apps/v1", "Deployment", DEPLOYMENT),
    ("batch/v1", "Job", JOB),
    ("rbac.authorization.k8s.io/v1", "Role", ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", ROLE_BINDING),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        ROLE_BINDING,
    ),
];

const MAGIC: &[u8] = b"k8s\0";

/// A protobuf reader over one message.
struct Reader<'a> {
    buf: &'a [u8],
}

#[derive(Debug)]
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self.buf.split_first().ok_or("truncated varint")?;
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err("truncated field".into());
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The next field: its number and value.
    fn field(&mut self) -> Result<Option<(u32, Wire<'a>)>, String> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let no = u32::try_from(tag >> 3).map_err(|_| "field number out of range")?;
        let wire = match tag & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| "length out of range")?;
                Wire::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        Ok(Some((no, wire)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, String> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.field()? {
        out.push(f);
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "a string field is not UTF-8".to_string())
}

fn b64(b: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(b))
}

/// A `map<string, X>` entry: key (1) and value (2).
fn entry(b: &[u8]) -> Result<(String, Option<Wire<'_>>), String> {
    let mut key = String::new();
    let mut value = None;
    for (no, w) in fields(b)? {
        match (no, w) {
            (1, Wire::Bytes(k)) => key = text(k)?,
            (2, w) => value = Some(w),
            _ => {}
        }
    }
    Ok((key, value))
}

/// A `metav1.Time`; the zero time (how Go encodes an unset one) is no time.
fn time(b: &[u8]) -> Result<Option<Value>, String> {
    let mut seconds = 0i64;
    for (no, w) in fields(b)? {
        if let (1, Wire::Varint(v)) = (no, w) {
            seconds = v as i64;
        }
    }
    // Go's zero time.Time is year 1 (seconds -62135596800), or an empty message.
    if seconds == 0 || seconds == -62_135_596_800 {
        return Ok(None);
    }
    let t = chrono::DateTime::from_timestamp(seconds, 0).ok_or("time out of range")?;
    Ok(Some(json!(
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    )))
}

/// Add one field's value to `out`.
fn put(out: &mut Map<String, Value>, name: &str, ty: T, w: Wire) -> Result<(), String> {
    let push = |out: &mut Map<String, Value>, v: Value| {
        if let Value::Array(a) = out.entry(name).or_insert_with(|| json!([])) {
            a.push(v);
        }
    };
    let insert = |out: &mut Map<String, Value>, k: String, v: Value| {
        if let Some(m) = out.entry(name).or_insert_with(|| json!({})).as_object_mut() {
            m.insert(k, v);
        }
    };
    match (ty, w) {
        (T::Str, Wire::Bytes(b)) => {
            if !b.is_empty() {
                out.insert(name.into(), json!(text(b)?));
            }
        }
        (T::Flag, Wire::Varint(v)) => {
            if v != 0 {
                out.insert(name.into(), json!(true));
            }
        }
        (T::Count, Wire::Varint(v)) => {
            if v != 0 {
                out.insert(name.into(), json!(v as i64));
            }
        }
        (T::Bool, Wire::Varint(v)) => {
            out.insert(name.into(), json!(v != 0));
        }
        (T::Int, Wire::Varint(v)) => {
            out.insert(name.into(), json!(v as i64));
        }
        (T::Time, Wire::Bytes(b)) => {
            if let Some(t) = time(b)? {
                out.insert(name.into(), t);
            }
        }
        (T::Msg(d), Wire::Bytes(b)) => {
            out.insert(name.into(), message(b, d)?);
        }
        (T::StrList, Wire::Bytes(b)) => push(out, json!(text(b)?)),
        (T::MsgList(d), Wire::Bytes(b)) => push(out, message(b, d)?),
        (T::Ignore, _) => {}
        (T::StrMap | T::BytesMap | T::ListMap | T::QuantityMap, Wire::Bytes(b)) => {
            let (k, v) = entry(b)?;
            let v = match (ty, v) {
                (T::StrMap, Some(Wire::Bytes(s))) => json!(text(s)?),
                (T::BytesMap, Some(Wire::Bytes(s))) => b64(s),
                (T::ListMap, Some(Wire::Bytes(s))) => message(s, &[F(1, "items", T::StrList)])?
                    .get("items")
                    .cloned()
                    .unwrap_or(json!([])),
                (T::QuantityMap, Some(Wire::Bytes(q))) => message(q, &[F(1, "q", T::Str)])?
                    .get("q")
                    .cloned()
                    .unwrap_or(json!("0")),
                (T::BytesMap, None) => json!(""),
                (T::ListMap, None) => json!([]),
                _ => json!(""),
            };
            insert(out, k, v);
        }
        (_, w) => return Err(format!("field {name:?} has an unexpected encoding {w:?}")),
    }
    Ok(())
}

/// Decodes one message. A field the table does not know is an error, not silently dropped:
/// the object would be stored without something the client set.
fn message(buf: &[u8], desc: &[F]) -> Result<Value, String> {
    let mut out = Map::new();
    for (no, w) in fields(buf)? {
        let Some(F(_, name, ty)) = desc.iter().find(|f| f.0 == no) else {
            let known: Vec<&str> = desc.iter().map(|f| f.1).collect();
            return Err(format!(
                "kube-sim cannot decode protobuf field number {no} next to {known:?}; send JSON"
            ));
        };
        put(&mut out, name, *ty, w)?;
    }
    Ok(Value::Object(out))
}

/// Decode a protobuf request body into the object's JSON.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let raw = body
        .strip_prefix(MAGIC)
        .ok_or("the body does not start with the Kubernetes protobuf magic")?;
    let (mut api_version, mut kind, mut object) = (String::new(), String::new(), &[][..]);
    for (no, w) in fields(raw)? {
        match (no, w) {
            (1, Wire::Bytes(tm)) => {
                for (n, w) in fields(tm)? {
                    match (n, w) {
                        (1, Wire::Bytes(v)) => api_version = text(v)?,
                        (2, Wire::Bytes(k)) => kind = text(k)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => object = b,
            _ => {}
        }
    }
    // DeleteOptions is registered in every group version; typed clients send the resource's.
    let delete_options = (kind == "DeleteOptions").then_some(DELETE_OPTIONS);
    let desc = KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
        .map(|(_, _, d)| *d)
        .or(delete_options)
        .ok_or_else(|| format!("kube-sim cannot decode protobuf for {api_version} {kind}"))?;
    let mut v = message(object, desc)?;
    v["apiVersion"] = json!(api_version);
    v["kind"] = json!(kind);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn bytes_field(no: u32, b: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(no) << 3 | 2, out);
        varint(b.len() as u64, out);
        out.extend_from_slice(b);
    }

    fn envelope(api_version: &str, kind: &str, object: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        bytes_field(1, api_version.as_bytes(), &mut tm);
        bytes_field(2, kind.as_bytes(), &mut tm);
        let mut u = MAGIC.to_vec();
        bytes_field(1, &tm, &mut u);
        bytes_field(2, object, &mut u);
        u
    }

    #[test]
    fn a_secret_with_metadata_maps_and_bytes() {
        let mut meta = Vec::new();
        bytes_field(1, b"creds", &mut meta);
        let mut label = Vec::new();
        bytes_field(1, b"app", &mut label);
        bytes_field(2, b"web", &mut label);
        bytes_field(11, &label, &mut meta);
        let mut secret = Vec::new();
        bytes_field(1, &meta, &mut secret);
        let mut data = Vec::new();
        bytes_field(1, b"password", &mut data);
        bytes_field(2, b"s3cret", &mut data);
        bytes_field(2, &data, &mut secret);
        bytes_field(3, b"Opaque", &mut secret);
        varint(5 << 3, &mut secret);
        varint(1, &mut secret);
        let v = decode(&envelope("v1", "Secret", &secret)).expect("decode");
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "creds", "labels": {"app": "web"}},
                   "data": {"password": "czNjcmV0"}, "type": "Opaque", "immutable": true})
        );
    }

    #[test]
    fn an_access_review_and_bad_input() {
        let mut attrs = Vec::new();
        bytes_field(2, b"list", &mut attrs);
        bytes_field(5, b"secrets", &mut attrs);
        let mut spec = Vec::new();
        bytes_field(1, &attrs, &mut spec);
        let mut review = Vec::new();
        bytes_field(2, &spec, &mut review);
        let v = decode(&envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &review,
        ))
        .expect("decode");
        assert_eq!(
            v["spec"],
            json!({"resourceAttributes": {"verb": "list", "resource": "secrets"}})
        );
        assert!(decode(b"{}").is_err());
        // A field no table knows is refused, not dropped.
        let mut unknown = Vec::new();
        bytes_field(2, &spec, &mut unknown);
        bytes_field(9, b"x", &mut unknown);
        let e = decode(&envelope(
            "authorization.k8s.io/v1",
            "SelfSubjectAccessReview",
            &unknown,
        ));
        assert!(e.is_err_and(|e| e.contains("field number 9")));
        assert!(decode(&envelope("v1", "Pod", &[])).is_err());
        let mut truncated = envelope("v1", "Secret", &review);
        truncated.truncate(truncated.len() - 2);
        assert!(decode(&truncated).is_err());
    }
}
