//! Lua scripting (EVAL, EVALSHA, SCRIPT): the Lua 5.1 interpreter, the script cache and
//! Redis's Lua API, with Redis 7.0's semantics.
//!
//! What lives here: the interpreter and its sandbox (`sandbox`: the libraries a script may
//! use, the protected globals, the `redis` table, Redis's error handler), the script cache
//! (SHA1 → compiled function and shebang flags, `shebang`), the conversions between
//! replies and Lua values (`reply`), the libraries Redis bundles (`libs`: cjson,
//! cmsgpack, bit, struct) and Redis's `math.random` (`rand`). `run` runs one script: its
//! `redis.call` / `redis.pcall` hand each command to the engine's one `execute`, in
//! `Mode::Script`, as any client's command — there is no second dispatcher — and parse the
//! reply back into Lua, as Redis parses its fake client's output.
//!
//! A script is logged by its effects: the records its commands propagate, wrapped in
//! `MULTI … EXEC` by the same code that wraps an EXEC's queue (`engine::transaction`), never
//! the script text. So replay needs no interpreter, and whatever a script did with
//! `math.random`, TIME or SPOP replays to the same dataset.

pub mod busy;
pub mod functions;
mod libs;
mod patches;
mod rand;
pub mod reply;
pub mod run;
pub(crate) mod sandbox;
pub mod shebang;

use bytes::Bytes;
use hashbrown::HashMap;
use mlua::Lua;
use std::sync::Arc;

pub use shebang::ScriptFlags;

/// Bytes of memory the interpreter may hold. Redis sets no bound (only `maxmemory`); a
/// script that builds a huge string or table gets Lua's "not enough memory" error here
/// instead of taking the server's memory. It must stay under 2 GB: it is also what keeps
/// chunks of 2 GB, whose long brackets overflow Lua 5.1's lexer (CVE-2025-46819,
/// `patches.rs`), out of the interpreter.
pub const LUA_MEMORY_BYTES_MAX: usize = 1024 * 1024 * 1024;

/// A cached script: its text, its shebang flags and its compiled function.
pub struct Script {
    pub body: Bytes,
    pub flags: ScriptFlags,
    function: mlua::Function,
}

/// Why a script could not be added to the cache (Redis's reply texts via `Display`).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}")]
    Shebang(#[from] shebang::ShebangError),
    #[error("Error compiling script (new function): {0}")]
    Compile(String),
    #[error("Error creating the script interpreter: {0}")]
    Interpreter(String),
}

/// The interpreters, the script cache and the function libraries.
pub struct Scripting {
    sandbox: Option<sandbox::Sandbox>,
    scripts: HashMap<[u8; 40], Script>,
    /// Functions live in an interpreter of their own, as in Redis: SCRIPT FLUSH leaves
    /// them alone, FUNCTION FLUSH starts it anew.
    function_sandbox: Option<sandbox::Sandbox>,
    libraries: std::collections::BTreeMap<String, functions::Library>,
    /// Function name, lower-cased (Redis finds functions, and their clashes between
    /// libraries, ignoring case) → its library's name and the name as registered.
    function_index: HashMap<String, (String, String)>,
    /// Buffers a run keeps from one run to the next (`run::run`): a command's reply, and
    /// the numbers given to `redis.call`.
    run_buffers: (Vec<u8>, Vec<u8>),
}

impl Default for Scripting {
    fn default() -> Self {
        Scripting::new()
    }
}

impl Scripting {
    pub fn new() -> Scripting {
        Scripting {
            sandbox: None,
            scripts: HashMap::new(),
            function_sandbox: None,
            libraries: Default::default(),
            function_index: HashMap::new(),
            run_buffers: Default::default(),
        }
    }

    /// The buffers a run reuses (see `run_buffers`), taken for the run's length.
    fn take_buffers(&mut self) -> (Vec<u8>, Vec<u8>) {
        std::mem::take(&mut self.run_buffers)
    }

    /// Gives the buffers back after a run (a huge reply's buffer is not kept).
    fn put_buffers(&mut self, reply: Vec<u8>, numbers: Vec<u8>) {
        const KEPT_BYTES_MAX: usize = 64 * 1024;
        if reply.capacity() <= KEPT_BYTES_MAX && numbers.capacity() <= KEPT_BYTES_MAX {
            self.run_buffers = (reply, numbers);
        }
    }

    /// The interpreter, created on first use (a server that runs no script pays nothing).
    fn sandbox(&mut self) -> Result<&sandbox::Sandbox, LoadError> {
        if self.sandbox.is_none() {
            let created =
                sandbox::Sandbox::new().map_err(|e| LoadError::Interpreter(e.to_string()))?;
            self.sandbox = Some(created);
        }
        Ok(self.sandbox.as_ref().expect("created above"))
    }

    /// Adds `body` to the cache (compiling it) unless it is there; returns its SHA1.
    pub fn load(&mut self, body: &[u8]) -> Result<[u8; 40], LoadError> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, shebang_len) = shebang::parse(body)?;
        // The shebang line is skipped but its line feed kept, so line numbers stay right.
        let function = self.sandbox()?.compile(&body[shebang_len..])?;
        self.scripts.insert(
            sha,
            Script {
                body: Bytes::copy_from_slice(body),
                flags,
                function,
            },
        );
        Ok(sha)
    }

    /// The cached script with this SHA1 (any letter case, as Redis's cache compares).
    pub fn get(&self, sha: &[u8]) -> Option<&Script> {
        let key: [u8; 40] = sha.try_into().ok()?;
        self.scripts.get(&key.map(|b| b.to_ascii_lowercase()))
    }

    pub fn exists(&self, sha: &[u8]) -> bool {
        self.get(sha).is_some()
    }

    pub fn len(&self) -> usize {
        self.scripts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scripts.is_empty()
    }

    /// SCRIPT FLUSH: forgets every script and starts a new interpreter (as Redis's
    /// `scriptingReset`), so nothing a script left in Lua's memory survives.
    pub fn flush(&mut self) {
        self.scripts.clear();
        // `math.random` goes on where it was, as Redis's generator lives outside Lua.
        let random = self
            .sandbox
            .take()
            .and_then(|old| old.lua.remove_app_data::<rand::Lrand48>());
        if let (Some(random), Ok(sandbox)) = (random, self.sandbox()) {
            sandbox.lua.set_app_data(random);
        }
    }

    /// FUNCTION LOAD [REPLACE]: runs the library's code and adds its functions; returns
    /// the library's name. A library that fails leaves everything as it was.
    pub fn load_library(
        &mut self,
        code: &[u8],
        replace: bool,
        timeout: bool,
    ) -> Result<String, functions::LibraryError> {
        use functions::LibraryError;
        let name = functions::metadata(code)?;
        if self.libraries.contains_key(&name) && !replace {
            return Err(LibraryError::Exists(name));
        }
        if self.function_sandbox.is_none() {
            let created = sandbox::Sandbox::new().map_err(|e| LibraryError::Code(e.to_string()))?;
            self.function_sandbox = Some(created);
        }
        let sandbox = self.function_sandbox.as_ref().expect("created above");
        // The first line is left out but its line feed kept: line numbers stay right.
        let line_len = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        let mut library = functions::load(
            &sandbox.lua,
            &sandbox.internals.table,
            &name,
            &code[line_len..],
            timeout,
        )?;
        library.code = bytes::Bytes::copy_from_slice(code);
        for function in library.functions.keys() {
            if let Some((owner, _)) = self.function_index.get(&function.to_ascii_lowercase())
                && *owner != name
            {
                return Err(LibraryError::FunctionExists(function.clone()));
            }
        }
        self.delete_library(&name);
        for function in library.functions.keys() {
            self.function_index.insert(
                function.to_ascii_lowercase(),
                (name.clone(), function.clone()),
            );
        }
        self.libraries.insert(name.clone(), library);
        Ok(name)
    }

    /// FUNCTION RESTORE: all of the libraries or, on an error, none (the previous ones
    /// are loaded again).
    pub fn restore_libraries(
        &mut self,
        codes: &[bytes::Bytes],
        policy: functions::RestorePolicy,
    ) -> Result<(), functions::LibraryError> {
        use functions::{LibraryError, RestorePolicy};
        let saved = self.library_codes();
        let mut apply = || -> Result<(), LibraryError> {
            match policy {
                RestorePolicy::Flush => self.flush_functions(),
                RestorePolicy::Append => {
                    for code in codes {
                        let name = functions::metadata(code)?;
                        if self.libraries.contains_key(&name) {
                            return Err(LibraryError::RestoredExists(name));
                        }
                    }
                }
                RestorePolicy::Replace => {}
            }
            for code in codes {
                self.load_library(code, policy == RestorePolicy::Replace, false)?;
            }
            Ok(())
        };
        let result = apply();
        if result.is_err() {
            self.flush_functions();
            for code in &saved {
                let _ = self.load_library(code, true, false);
            }
        }
        result
    }

    /// FUNCTION DELETE: whether there was such a library.
    pub fn delete_library(&mut self, name: &str) -> bool {
        let Some(library) = self.libraries.remove(name) else {
            return false;
        };
        for function in library.functions.keys() {
            self.function_index.remove(&function.to_ascii_lowercase());
        }
        true
    }

    /// FUNCTION FLUSH: every library, and the functions' interpreter.
    pub fn flush_functions(&mut self) {
        self.libraries.clear();
        self.function_index.clear();
        self.function_sandbox = None;
    }

    pub fn libraries(&self) -> impl Iterator<Item = &functions::Library> {
        self.libraries.values()
    }

    /// (libraries, functions): what FUNCTION STATS and INFO count.
    pub fn function_counts(&self) -> (usize, usize) {
        let functions = self.libraries.values().map(|l| l.functions.len()).sum();
        (self.libraries.len(), functions)
    }

    /// The libraries' code, for snapshots and for the engine that takes over the dataset.
    pub fn library_codes(&self) -> Vec<bytes::Bytes> {
        self.libraries.values().map(|l| l.code.clone()).collect()
    }

    /// The function named `name`, in any case (as Redis's FCALL finds it).
    pub fn function(&self, name: &str) -> Option<&functions::FunctionEntry> {
        let (library, registered) = self.function_index.get(&name.to_ascii_lowercase())?;
        self.libraries.get(library)?.functions.get(registered)
    }

    /// The functions' interpreter, a function's callback and the sandbox's table.
    fn prepare_function(
        &self,
        name: &str,
    ) -> Option<(Lua, mlua::Function, Arc<sandbox::Internals>)> {
        let sandbox = self.function_sandbox.as_ref()?;
        let function = self.function(name)?;
        Some((
            sandbox.lua.clone(),
            function.callback.clone(),
            sandbox.internals.clone(),
        ))
    }

    /// Bytes the interpreter uses (INFO `used_memory_lua`).
    pub fn memory_bytes(&self) -> usize {
        self.sandbox.as_ref().map_or(0, |s| s.lua.used_memory())
    }

    /// The script cache's memory (MEMORY STATS `lua.caches`): its table and each script's
    /// text (the compiled functions live in the interpreter: `memory_bytes`).
    pub fn cache_bytes(&self) -> usize {
        use crate::types::memory::allocation;
        let texts: usize = self
            .scripts
            .values()
            .map(|s| allocation(s.body.len()))
            .sum();
        allocation(self.scripts.allocation_size()) + texts
    }

    /// The function libraries' memory outside their interpreter (MEMORY STATS
    /// `functions.caches`): each library's code and name, and its functions' names.
    pub fn functions_bytes(&self) -> usize {
        use crate::types::memory::allocation;
        self.libraries
            .values()
            .map(|library| {
                let names: usize = library
                    .functions
                    .keys()
                    .map(|name| allocation(name.len()))
                    .sum();
                allocation(library.code.len()) + allocation(library.name.len()) + names
            })
            .sum()
    }

    /// The interpreter and a script's function, for `run`.
    fn prepare(&self, sha: &[u8; 40]) -> Option<(Lua, mlua::Function, Arc<sandbox::Internals>)> {
        let sandbox = self.sandbox.as_ref()?;
        let script = self.scripts.get(sha)?;
        Some((
            sandbox.lua.clone(),
            script.function.clone(),
            sandbox.internals.clone(),
        ))
    }
}

/// Whether `argv` (EVAL, EVALSHA, FCALL and their _RO forms) runs a script that counts
/// as `denyoom`: one whose flags declare it may write and do not allow OOM (Redis's
/// `scriptFlagsToCmdFlags`; a script without a shebang has EVAL's own flags: no).
pub fn declares_denyoom(
    scripting: &Scripting,
    spec: &crate::commands::CommandSpec,
    argv: &[&[u8]],
) -> bool {
    if matches!(spec.name, "fcall" | "fcall_ro") {
        let name = argv.get(1).map(|n| String::from_utf8_lossy(n).into_owned());
        return name
            .and_then(|n| {
                scripting
                    .function(&n)
                    .map(|f| !f.flags.no_writes && !f.flags.allow_oom)
            })
            .unwrap_or(false);
    }
    let denies = |flags: shebang::ScriptFlags| flags.declares_writes() && !flags.allow_oom;
    let sha = match spec.name {
        "evalsha" | "evalsha_ro" => argv.get(1).map(|sha| sha.to_vec()),
        "eval" | "eval_ro" => argv.get(1).map(|body| sha1_hex(body).to_vec()),
        _ => None,
    };
    let Some(sha) = sha else {
        return false;
    };
    match scripting.get(&sha) {
        Some(script) => denies(script.flags),
        None if matches!(spec.name, "eval" | "eval_ro") => argv
            .get(1)
            .and_then(|body| shebang::parse(body).ok())
            .is_some_and(|(flags, _)| denies(flags)),
        None => false,
    }
}

/// Whether `argv` (EVAL, EVALSHA and their _RO forms) runs a cached script whose shebang
/// declares that it may write: the engine refuses it up front while the log is failing,
/// as it refuses a write command (Redis's `evalGetCommandFlags`).
pub fn declares_writes(
    scripting: &Scripting,
    spec: &crate::commands::CommandSpec,
    argv: &[&[u8]],
) -> bool {
    if matches!(spec.name, "fcall" | "fcall_ro") {
        return function_flags(scripting, argv).is_some_and(|flags| !flags.no_writes);
    }
    script_flags(scripting, spec, argv).is_some_and(|flags| flags.declares_writes())
}

/// Whether running `argv` (EVAL, EVALSHA, FCALL) may write, as far as is known before it
/// runs: unless its script or function declares `no-writes` (CLIENT PAUSE WRITE holds the
/// others, Redis's `may_replicate` with `scriptFlagsToCmdFlags`).
pub fn may_write(
    scripting: &Scripting,
    spec: &crate::commands::CommandSpec,
    argv: &[&[u8]],
) -> bool {
    if matches!(spec.name, "fcall" | "fcall_ro") {
        return function_flags(scripting, argv).is_none_or(|flags| !flags.no_writes);
    }
    script_flags(scripting, spec, argv).is_none_or(|flags| flags.may_write())
}

fn function_flags<'a>(
    scripting: &'a Scripting,
    argv: &[&[u8]],
) -> Option<&'a shebang::ScriptFlags> {
    let name = argv
        .get(1)
        .map(|n| String::from_utf8_lossy(n).into_owned())?;
    scripting.function(&name).map(|f| &f.flags)
}

/// The shebang flags of the script EVAL or EVALSHA would run: the cached script's, or for
/// an EVAL not cached yet, its shebang's (Redis's `evalGetCommandFlags` parses it too).
fn script_flags(
    scripting: &Scripting,
    spec: &crate::commands::CommandSpec,
    argv: &[&[u8]],
) -> Option<shebang::ScriptFlags> {
    let sha = match spec.name {
        "evalsha" | "evalsha_ro" => argv.get(1).map(|sha| sha.to_vec()),
        "eval" | "eval_ro" => argv.get(1).map(|body| sha1_hex(body).to_vec()),
        _ => None,
    }?;
    match scripting.get(&sha) {
        Some(script) => Some(script.flags),
        None if matches!(spec.name, "eval" | "eval_ro") => argv
            .get(1)
            .and_then(|body| shebang::parse(body).ok())
            .map(|(flags, _)| flags),
        None => None,
    }
}

/// Subcommands of containers that scripts may not run (Redis flags them `noscript`, while
/// Tessera's table has one row per container): every CLIENT, CONFIG and ACL subcommand
/// but HELP, CLUSTER RESET, ..., as Redis's command table says.
pub fn subcommand_not_allowed(spec: &crate::commands::CommandSpec, argv: &[&[u8]]) -> bool {
    argv.len() > 1
        && crate::acl::table::table()
            .for_request(spec.name, argv)
            .is_some_and(|command| {
                command.parent.is_some() && command.flags.iter().any(|f| f == "noscript")
            })
}

/// Runs one level of a recursion over script data (a reply, JSON, MessagePack) on a stack
/// that grows on the heap when little is left: their depth is bounded (1000 levels), but
/// a level's frames are large in a debug build and the event loop runs on the main
/// thread's stack.
pub(crate) fn deep<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(64 * 1024, 1024 * 1024, f)
}

/// Lower-case hexadecimal SHA1 of `data` (script names, `redis.sha1hex`).
pub fn sha1_hex(data: &[u8]) -> [u8; 40] {
    let digest = sha1_smol::Sha1::from(data).digest().bytes();
    let mut hex = [0u8; 40];
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (i, byte) in digest.iter().enumerate() {
        hex[2 * i] = DIGITS[(byte >> 4) as usize];
        hex[2 * i + 1] = DIGITS[(byte & 15) as usize];
    }
    hex
}

/// C's `snprintf(buf, size, "%.<precision>g", value)`, which Redis and its Lua libraries
/// use to print numbers (`%.17g` for command arguments, `%.14g` in cjson).
pub(crate) fn format_g(value: f64, precision: u8) -> String {
    let mut buf = [0u8; 64];
    let len = format_g_in(&mut buf, value, precision);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// `format_g`, appended to `out`.
pub(crate) fn format_g_into(out: &mut Vec<u8>, value: f64, precision: u8) {
    let mut buf = [0u8; 64];
    let len = format_g_in(&mut buf, value, precision);
    out.extend_from_slice(&buf[..len]);
}

/// Prints `value` into `buf` as `format_g`; returns the length.
fn format_g_in(buf: &mut [u8; 64], value: f64, precision: u8) -> usize {
    let format: &[u8] = match precision {
        14 => b"%.14g\0",
        16 => b"%.16g\0",
        _ => b"%.17g\0",
    };
    // SAFETY: `buf` is 64 bytes and its size is passed, so snprintf writes at most that
    // (a %g of a double is at most about 25 bytes); the format is NUL-terminated and takes
    // exactly one double.
    let len = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            format.as_ptr() as *const libc::c_char,
            value,
        )
    };
    (len.max(0) as usize).min(buf.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_hex_is_redis_script_name() {
        assert_eq!(
            &sha1_hex(b"return 1"),
            b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }

    #[test]
    fn format_g_matches_c() {
        assert_eq!(format_g(0.1, 17), "0.10000000000000001");
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(3.0, 17), "3");
        assert_eq!(format_g(1e300, 14), "1e+300");
    }
}
