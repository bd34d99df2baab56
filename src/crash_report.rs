//! The report a crash leaves in the log. A panic (in any thread) or a fatal signal
//! (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes which thread it was and which command
//! was running — its name only, never its arguments, which are the clients' data — between
//! the START and END lines Redis's crash report uses, so that the alerts operators keep
//! for Redis find it. A signal's report is written with `write(2)` from the handler (no
//! allocation, no lock); the process then dies of the signal, as before.
//!
//! What it owns: the running command's name (set by the engine around each handler, read
//! from a signal handler: two atomics holding a `&'static str`), the log's raw descriptor,
//! the panic hook and the signal handlers.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

const START: &str = "=== TESSERA BUG REPORT START: Cut & paste starting from here ===\n";
const END: &str = "=== TESSERA BUG REPORT END. Make sure to include from START to END. ===\n";

/// The command running on the event loop: a `&'static str`'s pointer and length (null when
/// none).
static COMMAND_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static COMMAND_LEN: AtomicUsize = AtomicUsize::new(0);

/// Where reports go: the log file's own descriptor, or standard error.
static LOG_FD: AtomicI32 = AtomicI32::new(2);

const FATAL_SIGNALS: [(c_int, &str); 5] = [
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGABRT, "SIGABRT"),
];

/// Marks `name` as the running command until the guard is dropped (which restores the one
/// before: a script's `redis.call` runs inside EVAL).
/// Plain loads and stores, no read-modify-write: it runs around every command, and only
/// the event loop's thread stores.
pub fn running(name: &'static str) -> Running {
    let previous = (
        COMMAND_PTR.load(Ordering::Relaxed),
        COMMAND_LEN.load(Ordering::Relaxed),
    );
    COMMAND_PTR.store(name.as_ptr().cast_mut(), Ordering::Relaxed);
    COMMAND_LEN.store(name.len(), Ordering::Relaxed);
    Running { previous }
}

/// Restores the command that ran before (see `running`).
pub struct Running {
    previous: (*mut u8, usize),
}

impl Drop for Running {
    fn drop(&mut self) {
        COMMAND_PTR.store(self.previous.0, Ordering::Relaxed);
        COMMAND_LEN.store(self.previous.1, Ordering::Relaxed);
    }
}

fn command() -> &'static str {
    let ptr = COMMAND_PTR.load(Ordering::Relaxed);
    let len = COMMAND_LEN.load(Ordering::Relaxed);
    if ptr.is_null() {
        return "(none)";
    }
    // SAFETY: the pair was stored from a `&'static str` by `running` (or its guard), so it
    // points at `len` bytes of valid UTF-8 that live forever. The two loads are not one
    // atomic read, but only the event loop stores them, and a report read on that thread
    // (a panic, a fault) sees its own stores; elsewhere a torn pair only misnames a command
    // with the prefix of another static name.
    unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(ptr, len)) }
}

/// Installs the panic hook and the signal handlers; reports go to `logfile` (opened again
/// for appending, so a handler can write without the logger's lock), else standard error.
pub fn install(logfile: Option<&std::path::Path>) {
    if let Some(path) = logfile {
        use std::os::fd::IntoRawFd;
        if let Ok(file) = std::fs::OpenOptions::new().append(true).open(path) {
            LOG_FD.store(file.into_raw_fd(), Ordering::Relaxed);
        }
    }
    std::panic::set_hook(Box::new(report_panic));
    for (signal, _) in FATAL_SIGNALS {
        // SAFETY: a plain sigaction with a handler that only calls async-signal-safe
        // functions (write, sigaction, raise, pthread_getname_np on the calling thread);
        // SA_ONSTACK runs it on the thread's alternate stack (Rust's runtime gives every
        // thread one), so a stack overflow can still be reported.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal_signal as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESETHAND;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

fn write_all(bytes: &[u8]) {
    let fd = LOG_FD.load(Ordering::Relaxed);
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: writes from a valid slice to a descriptor this module owns (or stderr).
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// The calling thread's name, into `buffer` (no allocation: a signal handler calls it).
fn thread_name(buffer: &mut [u8; 32]) -> &str {
    // SAFETY: the buffer is valid for its length; the name is NUL-terminated within it.
    let ok = unsafe {
        libc::pthread_getname_np(
            libc::pthread_self(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    } == 0;
    let len = buffer.iter().position(|&b| b == 0).unwrap_or(0);
    match std::str::from_utf8(&buffer[..len]) {
        Ok(name) if ok && !name.is_empty() => name,
        _ => "(unnamed)",
    }
}

/// The panic hook: the report, with the panic's place and, when it is a fixed text, its
/// message (a formatted one may hold data, so it is left out).
fn report_panic(info: &std::panic::PanicHookInfo<'_>) {
    let mut buffer = [0u8; 32];
    let thread = thread_name(&mut buffer);
    let place = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_else(|| "an unknown place".into());
    let message = info
        .payload()
        .downcast_ref::<&'static str>()
        .copied()
        .unwrap_or("(a formatted message, left out: it may hold data)");
    let report = format!(
        "{START}Tessera {} panicked (Guru Meditation: {message} #{place})\n\
         Thread: {thread}\nCrashed running the command: {}\n{END}",
        env!("CARGO_PKG_VERSION"),
        command(),
    );
    write_all(report.as_bytes());
}

extern "C" fn on_fatal_signal(signal: c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let name = FATAL_SIGNALS
        .iter()
        .find(|(s, _)| *s == signal)
        .map_or("a fatal signal", |(_, name)| name);
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    let code = unsafe { (*info).si_code };
    let mut number = itoa::Buffer::new();
    let mut code_text = itoa::Buffer::new();
    let mut buffer = [0u8; 32];
    write_all(START.as_bytes());
    for piece in [
        "Tessera ",
        env!("CARGO_PKG_VERSION"),
        " crashed by signal: ",
        number.format(signal),
        " (",
        name,
        "), si_code: ",
        code_text.format(code),
        "\nThread: ",
        thread_name(&mut buffer),
        "\nCrashed running the command: ",
        command(),
        "\n",
        END,
    ] {
        write_all(piece.as_bytes());
    }
    // SA_RESETHAND restored the default action. A signal sent (kill, raise, abort) is
    // raised again to end the process by it; a fault returns and faults again.
    if code <= 0 || signal == libc::SIGABRT {
        // SAFETY: raise is async-signal-safe.
        unsafe {
            libc::raise(signal);
        }
    }
}
