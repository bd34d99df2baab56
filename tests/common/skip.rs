//! Tests that cannot run here fail, unless the missing capability's opt-in variable says
//! to skip them. A skip is announced on stderr (past the harness's capture, so a passing
//! run shows it too) and appended to the skip log, which `scripts/test` summarises at the
//! end of the run: every test binary is its own process, so the file is what they share.

use super::knobs::env_flag;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// What a test may lack, with the variable that allows skipping without it.
#[derive(Clone, Copy, Debug)]
pub enum Capability {
    /// Debian's `redis-server` 7.0, the oracle.
    Redis,
    /// Root, and the system tools that go with it (iproute2's `ip` and `ss`): mounting a
    /// tmpfs, creating network namespaces, raising the hard open-files limit.
    Privileged,
    /// An IPv6 loopback address.
    Ipv6,
}

impl Capability {
    pub fn opt_in(self) -> &'static str {
        match self {
            Capability::Redis => "TESSERA_SKIP_REDIS",
            Capability::Privileged => "TESSERA_SKIP_PRIVILEGED",
            Capability::Ipv6 => "TESSERA_SKIP_IPV6",
        }
    }
}

/// Names a whole test as what a skip leaves out (as opposed to a part of one).
pub const WHOLE_TEST: &str = "whole test";

/// Allows a redis-server other than 7.0.x as the oracle (noted in the summary).
pub const ALLOW_REDIS_VERSION: &str = "TESSERA_ALLOW_REDIS_VERSION";

/// The skip log: `TESSERA_SKIP_LOG` (set by `scripts/test`), else a file in the target
/// directory's scratch space.
fn skip_log() -> PathBuf {
    match std::env::var_os("TESSERA_SKIP_LOG") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => Path::new(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests"),
    }
}

/// One tab-separated line of the skip log, in a single append (atomic for a short line).
/// Reasons should read the same in every test they stop, so the summary groups them.
fn log_line(fields: &[&str]) {
    let fields: Vec<String> = fields
        .iter()
        .map(|field| field.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let path = skip_log();
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    let line = format!("{}\n", fields.join("\t"));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record in the skip log {}: {e}", path.display());
    }
}

/// Writes to stderr directly: the harness captures `eprintln!` of passing tests.
fn announce(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The test binary's name without the hash cargo appends (`differential`).
fn binary_name() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe.file_stem().unwrap_or_default().to_string_lossy();
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem.into_owned(),
    }
}

/// `binary::test`: the harness runs each test on a thread named after it.
fn current_test() -> String {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed thread>");
    format!("{}::{test}", binary_name())
}

/// Leaves out `what` (`WHOLE_TEST` or a part of the running test) because `reason`:
/// fails the test unless the capability's opt-in variable is 1, else records the skip.
/// The caller then returns (or leaves the part out).
pub fn skip(capability: Capability, what: &str, reason: &str) {
    let test = current_test();
    let opt_in = capability.opt_in();
    if !env_flag(opt_in) {
        panic!("{test} ({what}) cannot run: {reason}. Set {opt_in}=1 to skip it explicitly.");
    }
    announce(&format!(
        "*** SKIPPED {test} ({what}): {reason} [{opt_in}=1] ***"
    ));
    let name = if what == WHOLE_TEST {
        test
    } else {
        format!("{test} ({what})")
    };
    log_line(&["skip", &name, &format!("{reason} [{opt_in}=1]")]);
}

/// Names the oracle's binary when it is not Debian's (`redis-check-rdb` must be next to it).
pub const REDIS_SERVER: &str = "TESSERA_REDIS_SERVER";

/// Path of the oracle: `TESSERA_REDIS_SERVER` when set, else Debian's redis-server, if
/// installed.
pub fn redis_server_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(REDIS_SERVER).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path)).filter(|p| p.exists());
    }
    ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// The version `redis-server --version` reports (`7.0.15`).
fn redis_version(binary: &Path) -> Result<String, String> {
    let output = Command::new(binary)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {} --version: {e}", binary.display()))?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.split_whitespace()
        .find_map(|word| word.strip_prefix("v="))
        .map(str::to_string)
        .ok_or_else(|| format!("{} --version says {text:?}", binary.display()))
}

/// The oracle, checked once per test binary: installed, and 7.0.x unless another
/// version is allowed (then said once, loudly, and noted in the skip log's summary).
fn oracle() -> &'static Result<PathBuf, String> {
    static ORACLE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    ORACLE.get_or_init(|| {
        let path = redis_server_path().ok_or_else(|| match std::env::var_os(REDIS_SERVER) {
            Some(path) if !path.is_empty() => format!("{REDIS_SERVER}={path:?} does not exist"),
            _ => "redis-server is not installed (scripts/test installs it)".to_string(),
        })?;
        let version = redis_version(&path)?;
        if version.starts_with("7.0.") {
            return Ok(path);
        }
        if !env_flag(ALLOW_REDIS_VERSION) {
            return Err(format!(
                "redis-server is {version}, not the 7.0.x the tests compare against \
                 ({ALLOW_REDIS_VERSION}=1 uses it anyway)"
            ));
        }
        let note = format!(
            "redis-server {version} is the oracle instead of 7.0.x [{ALLOW_REDIS_VERSION}=1]"
        );
        announce(&format!("*** {}: {note} ***", binary_name()));
        log_line(&["note", &binary_name(), &note]);
        Ok(path)
    })
}

/// The oracle's path, for a helper of a test that has passed `require_redis_or_skip`
/// (so it is usable: this fails loudly otherwise).
pub fn gated_redis() -> PathBuf {
    match oracle() {
        Ok(path) => path.clone(),
        Err(reason) => panic!("the oracle was used without require_redis_or_skip: {reason}"),
    }
}

/// The oracle's path; without a usable one, `skip`s `what` (`WHOLE_TEST` or the part
/// of the test that needs Redis) and returns None.
pub fn require_redis_or_skip(what: &str) -> Option<PathBuf> {
    match oracle() {
        Ok(path) => Some(path.clone()),
        Err(reason) => {
            skip(Capability::Redis, what, reason);
            None
        }
    }
}
