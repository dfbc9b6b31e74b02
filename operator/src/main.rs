use std::process::ExitCode;

fn main() -> ExitCode {
    limit_malloc_arenas();
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

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}
