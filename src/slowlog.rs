//! The slow log (SLOWLOG): commands that ran for `slowlog-log-slower-than` microseconds
//! or more, newest first, at most `slowlog-max-len` of them, as Redis 7.0's `slowlog.c`
//! keeps them.
//!
//! An entry keeps a bounded copy of the command: at most 32 arguments (the last then says
//! how many more there were) of at most 128 bytes each, so a huge command cannot make the
//! log hold more than a few kilobytes per entry. Secrets are not kept: passwords and ACL
//! rules are replaced with `(redacted)` (`crate::redaction`, shared with MONITOR).

use std::collections::VecDeque;

/// Arguments kept per entry (Redis's SLOWLOG_ENTRY_MAX_ARGC).
const ARGUMENTS_MAX: usize = 32;
/// Bytes kept per argument (Redis's SLOWLOG_ENTRY_MAX_STRING).
const ARGUMENT_BYTES_MAX: usize = 128;

pub struct Entry {
    pub id: u64,
    pub unix_seconds: i64,
    pub duration_us: u64,
    pub arguments: Vec<Vec<u8>>,
    /// `ip:port` of the client.
    pub peer: String,
    pub client_name: String,
}

#[derive(Default)]
pub struct SlowLog {
    /// Newest first.
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// The command and its client, as the engine has them when it ran.
pub struct Command<'a> {
    pub argv: &'a [&'a [u8]],
    /// The command's name in the table (`auth`, `config`…), for redaction.
    pub name: &'a str,
    pub duration_us: u64,
    pub peer: String,
    pub client_name: String,
}

impl SlowLog {
    /// Whether a command that ran `duration_us` belongs in the log (Redis's test: a
    /// negative threshold disables it).
    pub fn wants(slower_than_us: i64, duration_us: u64) -> bool {
        slower_than_us >= 0 && duration_us >= slower_than_us as u64
    }

    /// Adds an entry and trims the log to `max_len`.
    pub fn push(&mut self, command: Command<'_>, max_len: usize) {
        let argc = command.argv.len();
        let kept = argc.min(ARGUMENTS_MAX);
        let redacted = crate::redaction::positions(command.name, command.argv);
        let arguments = (0..kept)
            .map(|index| {
                if kept != argc && index == kept - 1 {
                    format!("... ({} more arguments)", argc - kept + 1).into_bytes()
                } else if redacted.contains(&index) {
                    crate::redaction::REDACTED.to_vec()
                } else {
                    truncated(command.argv[index])
                }
            })
            .collect();
        self.entries.push_front(Entry {
            id: self.next_id,
            unix_seconds: crate::clock::unix_seconds(),
            duration_us: command.duration_us,
            arguments,
            peer: command.peer,
            client_name: command.client_name,
        });
        self.next_id += 1;
        self.trim(max_len);
    }

    /// Drops the oldest entries past `max_len` (also after CONFIG SET slowlog-max-len,
    /// which Redis applies at the next push).
    pub fn trim(&mut self, max_len: usize) {
        self.entries.truncate(max_len);
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Newest first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }
}

fn truncated(argument: &[u8]) -> Vec<u8> {
    if argument.len() <= ARGUMENT_BYTES_MAX {
        return argument.to_vec();
    }
    let mut kept = argument[..ARGUMENT_BYTES_MAX].to_vec();
    kept.extend_from_slice(
        format!("... ({} more bytes)", argument.len() - ARGUMENT_BYTES_MAX).as_bytes(),
    );
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(log: &mut SlowLog, argv: &[&[u8]], name: &str) {
        log.push(
            Command {
                argv,
                name,
                duration_us: 1,
                peer: String::new(),
                client_name: String::new(),
            },
            128,
        );
    }

    #[test]
    fn bounds_arguments_and_bytes() {
        let mut log = SlowLog::default();
        let long = vec![b'x'; 200];
        let many: Vec<&[u8]> = std::iter::repeat_n(long.as_slice(), 40).collect();
        push(&mut log, &many, "rpush");
        let entry = log.entries().next().unwrap();
        assert_eq!(entry.arguments.len(), 32);
        assert_eq!(entry.arguments[31], b"... (9 more arguments)");
        assert!(entry.arguments[0].ends_with(b"... (72 more bytes)"));
        assert_eq!(entry.arguments[0].len(), 128 + b"... (72 more bytes)".len());
    }

    #[test]
    fn redacts_secrets_and_trims() {
        let mut log = SlowLog::default();
        push(&mut log, &[b"AUTH", b"user", b"pw"], "auth");
        push(&mut log, &[b"HELLO", b"3", b"AUTH", b"u", b"p"], "hello");
        let entries: Vec<_> = log.entries().collect();
        assert_eq!(entries[0].arguments[3], b"(redacted)");
        assert_eq!(entries[0].arguments[2], b"AUTH");
        assert_eq!(entries[1].arguments[1], b"(redacted)");
        assert_eq!(entries[0].id, 1);
        log.trim(1);
        assert_eq!(log.len(), 1);
    }
}
