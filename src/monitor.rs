//! MONITOR: who monitors, and the line each of them is sent for every command run
//! (Redis's `replicationFeedMonitors`).
//!
//! The engine feeds a command here after it ran (before, for EVAL, EVALSHA and FCALL, so
//! that a script's own commands come after it), from its one execute path; a line is
//! formatted only when someone monitors. Admin commands and the script commands that feed
//! themselves are not shown (`shown`). Lines reach the monitors through the `Host`, under
//! their output limit, as pub/sub messages do.

use std::fmt::Write as _;

/// Where a monitored command came from, as the line names it.
pub enum Source<'a> {
    /// A client connected from this address (`ip:port`).
    Client(&'a str),
    /// A script's `redis.call`.
    Lua,
}

/// The clients in MONITOR mode, in the order they asked.
#[derive(Debug, Default)]
pub struct Monitors {
    ids: Vec<u64>,
}

impl Monitors {
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn add(&mut self, id: u64) {
        if !self.ids.contains(&id) {
            self.ids.push(id);
        }
    }

    /// RESET, or the connection closed.
    pub fn remove(&mut self, id: u64) {
        self.ids.retain(|&monitor| monitor != id);
    }

    pub fn ids(&self) -> &[u64] {
        &self.ids
    }
}

/// Whether a command with these flags and this name is shown: admin commands are too
/// dangerous to show (Redis), and the script commands show themselves before they run
/// (Redis's `skip_monitor`).
pub fn shown(admin: bool, name: &str) -> bool {
    !admin && !feeds_itself(name)
}

/// The commands whose line is sent before they run, not after.
pub fn feeds_itself(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// The arguments as monitors see them: credentials replaced by `(redacted)`
/// (`crate::redaction`).
pub fn redacted<'a>(name: &str, argv: &[&'a [u8]]) -> smallvec::SmallVec<[&'a [u8]; 8]> {
    let mut shown: smallvec::SmallVec<[&[u8]; 8]> = argv.iter().copied().collect();
    for at in crate::redaction::positions(name, argv) {
        shown[at] = crate::redaction::REDACTED;
    }
    shown
}

/// One line: `+<seconds>.<micro> [<db> <source>] "arg" ...` and CRLF, each argument
/// quoted as Redis's `sdscatrepr` does.
pub fn line(now_us: i64, db: usize, source: &Source<'_>, argv: &[&[u8]]) -> Vec<u8> {
    let mut head = String::with_capacity(48);
    let _ = write!(
        head,
        "+{}.{:06} [{db} ",
        now_us.div_euclid(1_000_000),
        now_us.rem_euclid(1_000_000)
    );
    match source {
        Source::Client(address) => head.push_str(address),
        Source::Lua => head.push_str("lua"),
    }
    head.push_str("] ");
    let mut out = head.into_bytes();
    for (index, argument) in argv.iter().enumerate() {
        if index > 0 {
            out.push(b' ');
        }
        push_repr(&mut out, argument);
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `bytes` in double quotes with C escapes for quotes, backslashes, control characters
/// and anything not printable ASCII (`\xNN`): Redis's `sdscatrepr`.
pub fn push_repr(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            b' '..=b'~' => out.push(byte),
            _ => {
                let _ = write!(ByteWriter(out), "\\x{byte:02x}");
            }
        }
    }
    out.push(b'"');
}

/// `fmt::Write` into a byte buffer (the escapes are ASCII).
struct ByteWriter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for ByteWriter<'_> {
    fn write_str(&mut self, text: &str) -> std::fmt::Result {
        self.0.extend_from_slice(text.as_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_quotes_as_redis_does() {
        let argv: [&[u8]; 3] = [b"set", b"k\"\\", b"\n\r\t\x07\x08\x00\xff a"];
        let text = line(
            1_700_000_000_000_042,
            3,
            &Source::Client("1.2.3.4:5"),
            &argv,
        );
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "+1700000000.000042 [3 1.2.3.4:5] \"set\" \"k\\\"\\\\\" \"\\n\\r\\t\\a\\b\\x00\\xff a\"\r\n"
        );
    }

    #[test]
    fn credentials_are_redacted() {
        let auth: [&[u8]; 3] = [b"AUTH", b"user", b"secret"];
        assert_eq!(
            redacted("auth", &auth).as_slice(),
            [b"AUTH" as &[u8], b"(redacted)", b"(redacted)"]
        );
        let hello: [&[u8]; 6] = [b"HELLO", b"3", b"SETNAME", b"n", b"AUTH", b"u"];
        assert_eq!(redacted("hello", &hello).as_slice(), hello);
        let hello: [&[u8]; 5] = [b"HELLO", b"2", b"auth", b"u", b"p"];
        assert_eq!(
            redacted("hello", &hello)[3..],
            [b"(redacted)" as &[u8], b"(redacted)"]
        );
        let bad_version: [&[u8]; 5] = [b"HELLO", b"4", b"AUTH", b"u", b"p"];
        assert_eq!(redacted("hello", &bad_version).as_slice(), bad_version);
    }

    #[test]
    fn a_script_command_is_named_lua() {
        let argv: [&[u8]; 1] = [b"get"];
        let text = line(1_000_000, 0, &Source::Lua, &argv);
        assert_eq!(text, b"+1.000000 [0 lua] \"get\"\r\n");
    }
}
