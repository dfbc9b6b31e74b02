use std::process::ExitCode;

fn main() -> ExitCode {
    limit_malloc_arenas();
    trim_malloc_periodically();
    egress_proxy_operator::cli::main()
}

/// glibc gives threads that allocate at once arenas of their own (up to eight per core) and
/// keeps what they once held: with the watch lists of thousands of workloads that was a large
/// part of the resident memory. One arena (bench, realistic workloads: 210 → 126 MiB at
/// 1,000, 335 → 229 MiB at 10,000; two arenas gave no gain) is enough for work that waits on
/// the API server: the time to inject 1,000 selected workloads did not change.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: mallopt only sets an allocator parameter; no thread has started yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// How often freed memory is given back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// glibc returns freed memory only from the top of its heap: what the startup's peak took
/// (list pages, every worker's plan at once) stays resident behind the caches allocated
/// after it. `malloc_trim` gives back every free page (bench, 10,000 realistic workloads:
/// the live heap is 25 MiB, the resident heap was 62 MiB). A plain thread: it needs no
/// runtime and a trim of a heap this size takes about a millisecond.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_malloc_periodically() {
    let trim = || loop {
        std::thread::sleep(TRIM_EVERY);
        // SAFETY: malloc_trim is thread-safe and only releases free memory.
        unsafe {
            libc::malloc_trim(0);
        }
    };
    // Without the thread the operator only keeps more memory; it still works.
    let _ = std::thread::Builder::new()
        .name("malloc-trim".into())
        .stack_size(64 * 1024)
        .spawn(trim);
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_malloc_periodically() {}
