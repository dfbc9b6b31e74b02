//! Local processes standing in for containers: started in their own process group with an
//! empty environment plus what the Pod declares, their output kept for `pods/log`, stopped
//! with SIGTERM then SIGKILL, and all killed when the server stops.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::logs::{Logs, Output, locked, tail_lines};

/// Output kept per container (the tail beyond this is dropped, like a rotated log).
const MAX_LOG_BYTES: usize = 10 << 20;
/// The kubelet reads at most this much of a termination message file.
const MAX_MESSAGE_BYTES: u64 = 4096;

/// What to start for one container.
pub(super) struct Spec {
    pub container: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// The scratch file standing in for `terminationMessagePath`.
    pub message_file: PathBuf,
    /// Use the output's tail when the message file is empty and the exit code is not 0.
    pub fallback_to_logs: bool,
}

/// A container's end, reported to the controller loop.
#[derive(Debug)]
pub(crate) struct Exit {
    pub pod_uid: String,
    pub container: String,
    /// 128 + signal for a process ended by a signal, as container runtimes report it.
    pub code: i32,
    pub message: String,
    pub finished_at: String,
}

struct Proc {
    pgid: i32,
    alive: Arc<AtomicBool>,
}

struct PodProcs {
    dir: PathBuf,
    procs: HashMap<String, Proc>,
    stopping: bool,
    gone: bool,
}

/// The running containers of every Pod, by Pod uid.
pub(crate) struct Procs {
    pods: HashMap<String, PodProcs>,
    exits: mpsc::UnboundedSender<Exit>,
    pub(super) logs: Logs,
}

fn signal(pgid: i32, sig: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

impl Procs {
    pub(super) fn new(exits: mpsc::UnboundedSender<Exit>, logs: Logs) -> Self {
        Self {
            pods: HashMap::new(),
            exits,
            logs,
        }
    }

    /// Whether the Pod's containers were started (some may have exited since).
    pub(super) fn started(&self, pod_uid: &str) -> bool {
        self.pods.contains_key(pod_uid)
    }

    pub(super) fn running(&self, pod_uid: &str) -> usize {
        self.pods.get(pod_uid).map_or(0, |p| {
            p.procs
                .values()
                .filter(|c| c.alive.load(Ordering::SeqCst))
                .count()
        })
    }

    /// A fresh scratch directory for a Pod (its processes' working directory).
    pub(super) fn pod_dir(pod_uid: &str) -> PathBuf {
        std::env::temp_dir().join(format!("kube-sim-pod-{pod_uid}"))
    }

    /// Start a Pod's containers; returns the ones that could not start, with why.
    pub(super) fn start(&mut self, pod_uid: &str, specs: Vec<Spec>) -> Vec<(String, String)> {
        let dir = Self::pod_dir(pod_uid);
        let mut pod = PodProcs {
            dir: dir.clone(),
            procs: HashMap::new(),
            stopping: false,
            gone: false,
        };
        let mut failed = Vec::new();
        for s in specs {
            let container = s.container.clone();
            match self.spawn(pod_uid, &dir, s) {
                Ok(p) => {
                    pod.procs.insert(container, p);
                }
                Err(e) => failed.push((container, e)),
            }
        }
        self.pods.insert(pod_uid.to_string(), pod);
        failed
    }

    fn spawn(&self, pod_uid: &str, dir: &Path, s: Spec) -> Result<Proc, String> {
        let fail = |e: std::io::Error| format!("starting {}: {e}", s.program.display());
        std::fs::create_dir_all(dir).map_err(fail)?;
        std::fs::write(&s.message_file, b"").map_err(fail)?;
        let (reader, writer) = std::io::pipe().map_err(fail)?;
        let writer2 = writer.try_clone().map_err(fail)?;
        let mut cmd = tokio::process::Command::new(&s.program);
        cmd.args(&s.args)
            .env_clear()
            .envs(&s.env)
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(writer2)
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill the child
        // when the thread that started it ends (a server that dies without cleaning up).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(fail)?;
        drop(cmd);
        let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        let out = self.logs.open(pod_uid, &s.container);
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let sink = out.clone();
        std::thread::spawn(move || {
            collect(reader, &sink);
            let _ = done_tx.send(());
        });
        let alive = Arc::new(AtomicBool::new(true));
        let ended = Ended {
            pod_uid: pod_uid.to_string(),
            pgid,
            alive: alive.clone(),
            out,
            exits: self.exits.clone(),
        };
        tokio::spawn(ended.wait(child, done_rx, s));
        Ok(Proc { pgid, alive })
    }

    /// Stop a Pod's processes: SIGTERM, then SIGKILL after `grace` (at once when zero).
    pub(super) fn stop(&mut self, pod_uid: &str, grace: Duration) {
        let Some(pod) = self.pods.get_mut(pod_uid) else {
            return;
        };
        if pod.stopping && !grace.is_zero() {
            return;
        }
        pod.stopping = true;
        for p in pod.procs.values() {
            if !p.alive.load(Ordering::SeqCst) {
                continue;
            }
            if grace.is_zero() {
                signal(p.pgid, libc::SIGKILL);
                continue;
            }
            signal(p.pgid, libc::SIGTERM);
            let (pgid, alive) = (p.pgid, p.alive.clone());
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                if alive.load(Ordering::SeqCst) {
                    signal(pgid, libc::SIGKILL);
                }
            });
        }
    }

    /// The Pod is gone: stop what still runs and clean up once nothing does.
    pub(super) fn pod_gone(&mut self, pod_uid: &str, grace: Duration) {
        self.stop(pod_uid, grace);
        if let Some(pod) = self.pods.get_mut(pod_uid) {
            pod.gone = true;
        }
        self.clean(pod_uid);
    }

    /// A container ended: forget the Pod if it is gone and nothing runs any more.
    pub(super) fn exited(&mut self, pod_uid: &str) {
        self.clean(pod_uid);
    }

    fn clean(&mut self, pod_uid: &str) {
        let done = self
            .pods
            .get(pod_uid)
            .is_some_and(|p| p.gone && p.procs.values().all(|c| !c.alive.load(Ordering::SeqCst)));
        if let Some(pod) = done.then(|| self.pods.remove(pod_uid)).flatten() {
            let _ = std::fs::remove_dir_all(&pod.dir);
            self.logs.forget(pod_uid);
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for pod in self.pods.values() {
            for p in pod.procs.values() {
                if p.alive.swap(false, Ordering::SeqCst) {
                    signal(p.pgid, libc::SIGKILL);
                }
            }
            let _ = std::fs::remove_dir_all(&pod.dir);
        }
    }
}

/// Append a pipe's bytes to the output until every writer has closed it.
fn collect(mut reader: std::io::PipeReader, out: &Mutex<Output>) {
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut o = locked(out);
                o.bytes.extend_from_slice(&buf[..n]);
                if o.bytes.len() > MAX_LOG_BYTES {
                    let cut = o.bytes.len() - MAX_LOG_BYTES;
                    o.bytes.drain(..cut);
                    o.dropped += cut;
                }
            }
        }
    }
    locked(out).open = false;
}

/// Waits for one container's process and reports how it ended.
struct Ended {
    pod_uid: String,
    pgid: i32,
    alive: Arc<AtomicBool>,
    out: Arc<Mutex<Output>>,
    exits: mpsc::UnboundedSender<Exit>,
}

impl Ended {
    async fn wait(
        self,
        mut child: tokio::process::Child,
        output_done: tokio::sync::oneshot::Receiver<()>,
        spec: Spec,
    ) {
        let status = child.wait().await;
        // The container's end ends every process it started, as a runtime's would.
        if self.alive.swap(false, Ordering::SeqCst) {
            signal(self.pgid, libc::SIGKILL);
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), output_done).await;
        let code = match status {
            Ok(s) => {
                use std::os::unix::process::ExitStatusExt;
                s.code().or(s.signal().map(|n| 128 + n)).unwrap_or(-1)
            }
            Err(_) => -1,
        };
        let mut message = read_message(&spec.message_file);
        if message.is_empty() && code != 0 && spec.fallback_to_logs {
            message = log_tail(&locked(&self.out).bytes);
        }
        let _ = self.exits.send(Exit {
            pod_uid: self.pod_uid,
            container: spec.container,
            code,
            message,
            finished_at: crate::object::now(),
        });
    }
}

fn read_message(path: &Path) -> String {
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(path) {
        let _ = f.take(MAX_MESSAGE_BYTES).read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The kubelet's fallback message: the last 80 lines of output, at most 2048 bytes of them.
fn log_tail(bytes: &[u8]) -> String {
    let lines = tail_lines(bytes, 80);
    let start = lines.len().saturating_sub(2048);
    String::from_utf8_lossy(&lines[start..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_count_lines_like_the_kubelet() {
        assert_eq!(tail_lines(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail_lines(b"a\nb\nc", 2), b"b\nc");
        assert_eq!(tail_lines(b"a\nb\n", 5), b"a\nb\n");
        assert_eq!(tail_lines(b"a\n", 0), b"");
        let many: Vec<u8> = (0..100)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        assert!(log_tail(&many).starts_with("20\n"));
    }
}
