//! The output of the containers kube-sim runs, kept per (Pod uid, container) for
//! `pods/log`: written by the process runner, read by the HTTP layer. A leaf.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One container's output (stdout and stderr interleaved).
#[derive(Debug, Default)]
pub struct Output {
    pub bytes: Vec<u8>,
    /// Bytes dropped from the front to bound the buffer.
    pub dropped: usize,
    /// Still being written.
    pub open: bool,
}

/// One container's output, shared by its reader and the `pods/log` handler.
pub type SharedOutput = Arc<Mutex<Output>>;

/// Container output by (Pod uid, container name), shared with the `pods/log` handler.
#[derive(Debug, Clone, Default)]
pub struct Logs(Arc<Mutex<HashMap<(String, String), SharedOutput>>>);

pub(crate) fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Logs {
    pub fn get(&self, pod_uid: &str, container: &str) -> Option<SharedOutput> {
        locked(&self.0)
            .get(&(pod_uid.to_string(), container.to_string()))
            .cloned()
    }

    pub(crate) fn open(&self, pod_uid: &str, container: &str) -> SharedOutput {
        let out = Arc::new(Mutex::new(Output {
            bytes: Vec::new(),
            dropped: 0,
            open: true,
        }));
        let key = (pod_uid.to_string(), container.to_string());
        locked(&self.0).insert(key, out.clone());
        out
    }

    pub(crate) fn forget(&self, pod_uid: &str) {
        locked(&self.0).retain(|(uid, _), _| uid != pod_uid);
    }
}

/// Locks the output buffer.
pub fn read(out: &Mutex<Output>) -> MutexGuard<'_, Output> {
    locked(out)
}

/// The last `n` lines of `bytes` (a final line without a newline counts).
pub fn tail_lines(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &bytes[bytes.len()..];
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}
