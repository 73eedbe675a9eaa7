//! The `slurm-dws` binary: parse the command line, run it, turn the outcome into an exit code.

use std::process::ExitCode;

use clap::Parser;

use slurm_dws::cli::{self, Cli};

/// jemalloc, with one arena and no dirty or muzzy pages kept: a steady 10k-node pass allocates and
/// frees ~20 MB; glibc's malloc spent ~18% of the pass in its own bins, and more arenas or kept
/// pages hold tens of MB more RSS (`make bench`; docs/architecture.md, "Memory"). The feature
/// `system-malloc` (heap profiling only, benches/budgets/whole_pass.rs) leaves glibc's malloc.
#[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once when it starts (`_rjem_` is the crate's symbol prefix).
#[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static MALLOC_CONF: &[u8; 44] = b"narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0\0";

/// SQLite's allocations (its page caches, prepared statements, the copy of each text a write binds)
/// through the same jemalloc. SQLite is C and calls `malloc`, which is glibc's in this binary
/// (jemalloc's symbols are prefixed): glibc gave each sqlx connection thread an arena of its own and
/// kept the multi-megabyte texts of a 10,000-node write in them after they were freed, ~6 MB of the
/// daemon's peak RSS (`make bench`; docs/architecture.md, "Memory").
#[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
mod allocator {
    use libsqlite3_sys as sqlite;
    use std::os::raw::{c_int, c_void};
    use tikv_jemalloc_sys as jemalloc;

    fn bytes(n: c_int) -> usize {
        usize::try_from(n).unwrap_or(0)
    }

    fn int(n: usize) -> c_int {
        c_int::try_from(n).unwrap_or(c_int::MAX)
    }

    unsafe extern "C" fn x_malloc(n: c_int) -> *mut c_void {
        // SAFETY: jemalloc's malloc takes any size; SQLite frees what it gets through x_free.
        unsafe { jemalloc::malloc(bytes(n)) }
    }

    unsafe extern "C" fn x_free(p: *mut c_void) {
        // SAFETY: SQLite hands back only what x_malloc or x_realloc gave it.
        unsafe { jemalloc::free(p) }
    }

    unsafe extern "C" fn x_realloc(p: *mut c_void, n: c_int) -> *mut c_void {
        // SAFETY: as x_free: `p` came from jemalloc.
        unsafe { jemalloc::realloc(p, bytes(n)) }
    }

    unsafe extern "C" fn x_size(p: *mut c_void) -> c_int {
        if p.is_null() {
            return 0;
        }
        // SAFETY: a live allocation of jemalloc's.
        int(unsafe { jemalloc::malloc_usable_size(p) })
    }

    unsafe extern "C" fn x_roundup(n: c_int) -> c_int {
        // SAFETY: nallocx only computes a size class; 0 means the size is too large for one.
        match unsafe { jemalloc::nallocx(bytes(n).max(1), 0) } {
            0 => n,
            rounded => int(rounded),
        }
    }

    unsafe extern "C" fn x_init(_: *mut c_void) -> c_int {
        sqlite::SQLITE_OK
    }

    unsafe extern "C" fn x_shutdown(_: *mut c_void) {}

    /// Hands SQLite the functions above. It must come before SQLite initialises (the first
    /// connection): later, SQLite refuses it (`SQLITE_MISUSE`) and keeps glibc's malloc, which only
    /// costs memory, so the answer is not an error to stop for.
    pub fn sqlite_on_jemalloc() {
        let methods = sqlite::sqlite3_mem_methods {
            xMalloc: Some(x_malloc),
            xFree: Some(x_free),
            xRealloc: Some(x_realloc),
            xSize: Some(x_size),
            xRoundup: Some(x_roundup),
            xInit: Some(x_init),
            xShutdown: Some(x_shutdown),
            pAppData: std::ptr::null_mut(),
        };
        // SAFETY: called once, first thing in main, before any thread or connection exists; SQLite
        // copies the structure before it returns.
        let rc = unsafe { sqlite::sqlite3_config(sqlite::SQLITE_CONFIG_MALLOC, &raw const methods) };
        debug_assert_eq!(rc, sqlite::SQLITE_OK, "sqlite3_config(SQLITE_CONFIG_MALLOC)");
    }

    /// Freed pages kept for jemalloc's default 10 s instead of returned at once (`MALLOC_CONF`
    /// above): for every command but the daemon. Only the daemon runs for months with its RSS a
    /// budget; a command that runs for a second gains nothing from returning pages it faults in
    /// again a moment later (`usage --by job` over a month at 10,000 nodes prints ~65 MB: a fifth
    /// of its time went to page faults). Best effort: a refused setting leaves the pages returned.
    pub fn keep_freed_pages() {
        for name in [c"arena.0.dirty_decay_ms", c"arenas.dirty_decay_ms"] {
            let mut ms: isize = 10_000;
            // SAFETY: a known name of a writable `ssize_t` setting, given a pointer to one and its
            // size; nothing is read back.
            let rc = unsafe {
                jemalloc::mallctl(
                    name.as_ptr(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    (&raw mut ms).cast(),
                    std::mem::size_of::<isize>(),
                )
            };
            debug_assert_eq!(rc, 0, "mallctl({name:?})");
        }
    }
}

fn main() -> ExitCode {
    #[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
    allocator::sqlite_on_jemalloc();
    // Under slurmctld fds 0-2 are closed and signals blocked: repair that before anything opens a file.
    slurm_dws::hook::prepare_process();
    // --help and --version print in full (exit 0); a usage error is one line and exit 2.
    let cli = match Cli::try_parse_from(cli::argv()) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("slurm-dws: {}", cli::usage_error_line(&e));
            return ExitCode::from(cli::EXIT_USAGE);
        }
    };
    #[cfg(all(target_os = "linux", not(feature = "system-malloc")))]
    if !matches!(cli.command, cli::Command::Daemon) {
        allocator::keep_freed_pages();
    }
    match cli::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("slurm-dws: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
