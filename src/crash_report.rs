//! The report a crash leaves in the log. A panic (in any thread) or a fatal signal
//! (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) writes which thread it was and which command
//! was running — its name only, never its arguments, which are the clients' data — and the
//! thread's stack trace, between the START and END lines Redis's crash report uses (and
//! under its "STACK TRACE" heading), so that the alerts operators keep for Redis find it. A signal's report is written with `write(2)` from the handler (no
//! allocation, no lock); the process then dies of the signal, as before.
//!
//! What it owns: the running command's name (set by the engine around each handler, read
//! from a signal handler: two atomics holding a `&'static str`), the log's raw descriptor,
//! the panic hook and the signal handlers, and the panic policy.
//!
//! **The panic policy.** A panic ends the process, right after its report, as Redis's
//! assertions do; nothing unwinds, no destructor runs. A command's panic is not turned into
//! an error reply: the handler may have changed half of a value, and a transaction or a
//! script part of its writes, with no way to prove either consistent; what was
//! acknowledged is in the log already (a reply leaves only after its write reached the
//! log file), so the restart's replay is the consistent state. The same holds for the log
//! writer and fsync threads, which carry every write's durability: a server going on
//! without them would hang its clients or acknowledge what no file holds.
//! Two kinds of threads are *contained* ([`contain_panics`]): a snapshot part's writer
//! (its job fails as on a write error, the manifest in force stays, the server goes on:
//! Redis's parent outlives a crashed child too) and a loading thread at start-up (the
//! load fails, the server exits with its error and nothing on disk changed). Their joiners
//! turn the panic into a typed error; they own nothing the event loop reads afterwards.
//! Tests inject panics at named points ([`inject`], the `fault-injection` feature).

use std::cell::Cell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicUsize, Ordering};

const START: &str = "=== TESSERA BUG REPORT START: Cut & paste starting from here ===\n";
const END: &str = "=== TESSERA BUG REPORT END. Make sure to include from START to END. ===\n";

/// The command running on the event loop: a `&'static str`'s pointer and length (null when
/// none).
static COMMAND_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static COMMAND_LEN: AtomicUsize = AtomicUsize::new(0);

/// Where reports go: the log file's own descriptor, or standard output (where the log goes
/// without a `logfile`, as Redis's does).
static LOG_FD: AtomicI32 = AtomicI32::new(1);

const FATAL_SIGNALS: [(c_int, &str); 5] = [
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGABRT, "SIGABRT"),
];

thread_local! {
    /// Whether a panic on this thread is contained (see the module's panic policy).
    static CONTAINED: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as contained: its panic is reported and unwinds to its joiner,
/// which turns it into a failed job, instead of ending the process. For threads whose
/// joiner handles `Err` from `join` and whose shared state stays valid at any panic point
/// (a snapshot part's writer, a loading thread).
pub fn contain_panics() {
    CONTAINED.with(|contained| contained.set(true));
}

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
/// for appending, so a handler can write without the logger's lock), else standard output.
pub fn install(logfile: Option<&std::path::Path>) {
    if let Some(path) = logfile {
        use std::os::fd::IntoRawFd;
        if let Ok(file) = std::fs::OpenOptions::new().append(true).open(path) {
            LOG_FD.store(file.into_raw_fd(), Ordering::Relaxed);
        }
    }
    std::panic::set_hook(Box::new(report_panic));
    stack_trace::prepare();
    for (signal, _) in FATAL_SIGNALS {
        // SAFETY: a plain sigaction with a handler that only calls async-signal-safe
        // functions (write, sigaction, raise, pthread_getname_np on the calling thread;
        // glibc's backtrace, prepared above, as Redis's handler calls it);
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
        // SAFETY: writes from a valid slice to a descriptor this module owns (or stdout).
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// The crashing thread's frames, under Redis's "STACK TRACE" heading: glibc's
/// `backtrace`, written straight to the log by `backtrace_symbols_fd` (no allocation), as
/// Redis's crash report writes them. A frame is the binary and an offset in it
/// (`addr2line -e tessera-server <offset>` names it: Rust's functions are not in the
/// dynamic symbol table).
mod stack_trace {
    /// Frames shown at most (Redis's 100).
    const FRAMES_MAX: usize = 100;

    /// The first `backtrace` loads the unwinder (it allocates): done at start-up, so that
    /// a signal handler's does not.
    pub fn prepare() {
        #[cfg(target_env = "gnu")]
        {
            let mut frames = [std::ptr::null_mut(); 1];
            // SAFETY: the buffer is valid for the one frame asked for.
            unsafe { libc::backtrace(frames.as_mut_ptr(), 1) };
        }
    }

    pub fn write() {
        super::write_all(b"\n------ STACK TRACE ------\n\nBacktrace:\n");
        #[cfg(target_env = "gnu")]
        {
            let mut frames = [std::ptr::null_mut(); FRAMES_MAX];
            // SAFETY: the buffer is valid for FRAMES_MAX frames, and backtrace_symbols_fd
            // reads the `count` that backtrace filled, writing to a descriptor this module
            // owns (or stdout).
            unsafe {
                let count = libc::backtrace(frames.as_mut_ptr(), FRAMES_MAX as libc::c_int);
                let fd = super::LOG_FD.load(std::sync::atomic::Ordering::Relaxed);
                libc::backtrace_symbols_fd(frames.as_ptr(), count, fd);
            }
        }
        #[cfg(not(target_env = "gnu"))]
        super::write_all(b"(no backtrace on this platform)\n");
        super::write_all(b"\n");
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
    let contained = CONTAINED.with(Cell::get);
    let outcome = if contained {
        "The thread's job fails with an error: a contained thread (see the panic policy)."
    } else {
        "The server stops; its log holds every acknowledged write."
    };
    let report = format!(
        "{START}Tessera {} panicked (Guru Meditation: {message} #{place})\n\
         Thread: {thread}\nCrashed running the command: {}\n{outcome}\n",
        env!("CARGO_PKG_VERSION"),
        command(),
    );
    write_all(report.as_bytes());
    stack_trace::write();
    write_all(END.as_bytes());
    if !contained {
        // SAFETY: restoring SIGABRT's default action and aborting have no memory-safety
        // preconditions; the default action keeps the SIGABRT handler from writing a
        // second report.
        unsafe {
            libc::signal(libc::SIGABRT, libc::SIG_DFL);
            libc::abort();
        }
    }
}

/// The named points where tests inject a panic: `TESSERA_PANIC_AT=<point>` (its first
/// occurrence) or `<point>:N` (its Nth). Without the `fault-injection` feature [`inject`]
/// compiles to nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PanicPoint {
    /// The log writer appending a batch (on its thread or inline on the loop's).
    LogWrite,
    /// The fsync thread, before an fsync.
    Fsync,
    /// A snapshot part's writer, before it writes a captured slot.
    SnapshotPart,
    /// A thread loading a base file at start-up.
    BaseLoad,
    /// The thread parsing a log file at start-up.
    LogReplay,
    /// A script's `redis.call` / `redis.pcall`, before the command runs.
    ScriptCall,
}

impl PanicPoint {
    #[cfg(feature = "fault-injection")]
    const ALL: [PanicPoint; 6] = [
        PanicPoint::LogWrite,
        PanicPoint::Fsync,
        PanicPoint::SnapshotPart,
        PanicPoint::BaseLoad,
        PanicPoint::LogReplay,
        PanicPoint::ScriptCall,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            PanicPoint::LogWrite => "log-write",
            PanicPoint::Fsync => "fsync",
            PanicPoint::SnapshotPart => "snapshot-part",
            PanicPoint::BaseLoad => "base-load",
            PanicPoint::LogReplay => "log-replay",
            PanicPoint::ScriptCall => "script-call",
        }
    }
}

/// The environment variable naming where a panic is injected (see [`PanicPoint`]).
#[cfg(feature = "fault-injection")]
pub const PANIC_AT_ENV: &str = "TESSERA_PANIC_AT";

/// Panics here when `TESSERA_PANIC_AT` names this point and occurrence (test equipment);
/// the report gives the caller's place.
#[inline]
#[track_caller]
pub fn inject(point: PanicPoint) {
    #[cfg(feature = "fault-injection")]
    injection::reached(point);
    #[cfg(not(feature = "fault-injection"))]
    let _ = point;
}

#[cfg(feature = "fault-injection")]
mod injection {
    use super::{PANIC_AT_ENV, PanicPoint};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[track_caller]
    pub(super) fn reached(point: PanicPoint) {
        static TARGET: OnceLock<Option<(PanicPoint, u64)>> = OnceLock::new();
        static REACHED: AtomicU64 = AtomicU64::new(0);
        let Some((target, nth)) = *TARGET.get_or_init(from_environment) else {
            return;
        };
        if target == point && REACHED.fetch_add(1, Ordering::Relaxed) + 1 == nth {
            // A fixed text, so the report carries it.
            std::panic::panic_any(point.as_str());
        }
    }

    /// `point` or `point:N`; anything else is reported and ignored (a test relying on it
    /// then fails for want of the panic).
    fn from_environment() -> Option<(PanicPoint, u64)> {
        let text = std::env::var(PANIC_AT_ENV).ok()?;
        let (name, nth) = match text.split_once(':') {
            Some((name, nth)) => (name, nth.parse().ok().filter(|&n| n > 0)),
            None => (text.as_str(), Some(1)),
        };
        let point = PanicPoint::ALL.into_iter().find(|p| p.as_str() == name);
        match (point, nth) {
            (Some(point), Some(nth)) => Some((point, nth)),
            _ => {
                tracing::error!("{PANIC_AT_ENV}={text} ignored: no such point or occurrence");
                None
            }
        }
    }
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
    ] {
        write_all(piece.as_bytes());
    }
    stack_trace::write();
    write_all(END.as_bytes());
    // SA_RESETHAND restored the default action. A signal sent (kill, raise, abort) is
    // raised again to end the process by it; a fault returns and faults again.
    if code <= 0 || signal == libc::SIGABRT {
        // SAFETY: raise is async-signal-safe.
        unsafe {
            libc::raise(signal);
        }
    }
}
