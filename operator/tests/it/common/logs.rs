//! What the process logs, for the tests that check it (no credential in any log line). One
//! subscriber for the whole test binary, installed on first use, at `debug` for every target;
//! it keeps lines only while some test holds a [`Capture`], so the other tests' logs do not
//! pile up. Lines of tests running at the same time land in the capture too: the checks look
//! for their own sentinels only.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

static ACTIVE: AtomicUsize = AtomicUsize::new(0);
static LINES: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// A test's window on the process's logs: from its start until it is dropped.
pub struct Capture {
    from: usize,
}

/// Starts capturing (installing the subscriber the first time).
pub fn capture() -> Capture {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let active = filter_fn(|_| ACTIVE.load(Ordering::SeqCst) > 0);
        let layer = fmt::layer()
            .with_writer(|| Writer)
            .with_ansi(false)
            .with_filter(EnvFilter::new("debug").and(active));
        let _ = tracing_subscriber::registry().with(layer).try_init();
    });
    let mut lines = LINES.lock().unwrap_or_else(|p| p.into_inner());
    if ACTIVE.fetch_add(1, Ordering::SeqCst) == 0 {
        lines.clear();
    }
    Capture { from: lines.len() }
}

impl Capture {
    /// Everything logged since this capture started.
    pub fn text(&self) -> String {
        let lines = LINES.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&lines[self.from.min(lines.len())..]).into_owned()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

struct Writer;

impl std::io::Write for Writer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if ACTIVE.load(Ordering::SeqCst) > 0 {
            let mut lines = LINES.lock().unwrap_or_else(|p| p.into_inner());
            lines.extend_from_slice(b);
        }
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
