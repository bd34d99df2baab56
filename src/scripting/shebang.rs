//! A script's first line, `#!lua flags=no-writes,allow-oom,...`: which flags it declares
//! (Redis 7.0's `evalExtractShebangFlags`, with its error texts).
//!
//! A script without a shebang runs in compatibility mode: its writes are checked one by one
//! as `redis.call` makes them. A script with one is checked before it runs, by what it
//! declares (a script that may write gets MISCONF at once while the log is failing).

/// The flags a script declares; `compat` when it has no shebang line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    pub compat: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

impl ScriptFlags {
    /// Whether running the script may write: scripts without a shebang may (their writes
    /// are checked as they come), and so may those that do not declare `no-writes`.
    pub fn may_write(&self) -> bool {
        self.compat || !self.no_writes
    }

    /// Whether the script declared that it may write (and is so refused up front while
    /// the log is failing, and by the *_RO commands).
    pub fn declares_writes(&self) -> bool {
        !self.compat && !self.no_writes
    }
}

/// A shebang Redis refuses (texts are Redis's replies, without the "ERR " code).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ShebangError {
    #[error("Invalid script shebang")]
    NoLineEnd,
    #[error("Invalid engine in script shebang")]
    NoEngine,
    #[error("Unexpected engine in script shebang: {0}")]
    UnexpectedEngine(String),
    #[error("Unexpected flag in script shebang: {0}")]
    UnexpectedFlag(String),
    #[error("Unknown lua shebang option: {0}")]
    UnknownOption(String),
}

/// The script's flags and the length of its shebang line (without its line feed, which the
/// compiled text keeps so that line numbers stay right).
pub fn parse(body: &[u8]) -> Result<(ScriptFlags, usize), ShebangError> {
    if !body.starts_with(b"#!") {
        return Ok((
            ScriptFlags {
                compat: true,
                ..ScriptFlags::default()
            },
            0,
        ));
    }
    let line_len = body
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(ShebangError::NoLineEnd)?;
    let parts = crate::resp::split_args(&body[..line_len]).unwrap_or_default();
    let Some(engine) = parts.first() else {
        return Err(ShebangError::NoEngine);
    };
    if engine.as_slice() != b"#!lua" {
        return Err(ShebangError::UnexpectedEngine(lossy(engine)));
    }
    let mut flags = ScriptFlags::default();
    for part in &parts[1..] {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(ShebangError::UnknownOption(lossy(part)));
        };
        if list.is_empty() {
            continue;
        }
        for flag in list.split(|&b| b == b',') {
            match flag {
                b"no-writes" => flags.no_writes = true,
                b"allow-oom" => flags.allow_oom = true,
                b"allow-stale" => flags.allow_stale = true,
                b"no-cluster" => flags.no_cluster = true,
                b"allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
                other => return Err(ShebangError::UnexpectedFlag(lossy(other))),
            }
        }
    }
    Ok((flags, line_len))
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_errors_as_redis() {
        let (flags, len) = parse(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(flags.no_writes && flags.allow_oom && !flags.compat);
        assert_eq!(len, 31);
        assert!(parse(b"return 1").unwrap().0.compat);
        assert_eq!(parse(b"#!lua"), Err(ShebangError::NoLineEnd));
        assert_eq!(
            parse(b"#!luax\n"),
            Err(ShebangError::UnexpectedEngine("#!luax".into()))
        );
        assert_eq!(
            parse(b"#!lua flags=bad\n"),
            Err(ShebangError::UnexpectedFlag("bad".into()))
        );
        assert_eq!(
            parse(b"#!lua name=x\n"),
            Err(ShebangError::UnknownOption("name=x".into()))
        );
        assert!(parse(b"#!lua flags=\n").is_ok());
    }
}
