//! The ACL log (ACL LOG): the most recent denials, newest first, at most `acllog-max-len`
//! entries. A denial like one of the last 10 entries (same reason, context, object and
//! user, within a minute) bumps that entry's count and moves it to the front instead of
//! adding one, as Redis's `addACLLogEntry` does.

use crate::resp::ReplyWriter;
use std::collections::VecDeque;

/// Entries within this many ms of each other may be grouped.
const GROUPING_WINDOW_MS: i64 = 60_000;
/// How many recent entries a new denial is compared with.
const GROUPING_SCAN_ENTRIES: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the denied command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    TopLevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::TopLevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command's full name, the key or channel refused, or AUTH's own name.
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix ms of the last denial counted here.
    pub time_ms: i64,
    /// CLIENT INFO of the client denied last.
    pub client_info: String,
}

#[derive(Default)]
pub struct Log {
    entries: VecDeque<Entry>,
}

impl Log {
    /// Records a denial; `max_len` is `acllog-max-len`.
    pub fn add(&mut self, entry: Entry, max_len: usize) {
        let similar = self
            .entries
            .iter()
            .take(GROUPING_SCAN_ENTRIES)
            .position(|old| {
                old.reason == entry.reason
                    && old.context == entry.context
                    && (old.time_ms - entry.time_ms).abs() <= GROUPING_WINDOW_MS
                    && old.object == entry.object
                    && old.username == entry.username
            });
        if let Some(index) = similar {
            let mut old = self.entries.remove(index).expect("found above");
            old.count += 1;
            old.time_ms = entry.time_ms;
            old.client_info = entry.client_info;
            self.entries.push_front(old);
        } else {
            self.entries.push_front(entry);
            self.entries.truncate(max_len);
        }
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

    /// ACL LOG [count]: the newest `count` entries as maps.
    pub fn write(&self, out: &mut ReplyWriter, count: usize, now_ms: i64) {
        let count = count.min(self.entries.len());
        out.array(count);
        for entry in self.entries.iter().take(count) {
            out.map(7);
            out.bulk(b"count");
            out.integer(entry.count as i64);
            out.bulk(b"reason");
            out.bulk(entry.reason.name().as_bytes());
            out.bulk(b"context");
            out.bulk(entry.context.name().as_bytes());
            out.bulk(b"object");
            out.bulk(&entry.object);
            out.bulk(b"username");
            out.bulk(&entry.username);
            out.bulk(b"age-seconds");
            out.double((now_ms - entry.time_ms) as f64 / 1000.0);
            out.bulk(b"client-info");
            out.bulk(entry.client_info.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, time_ms: i64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Command,
            context: Context::TopLevel,
            object: object.as_bytes().to_vec(),
            username: b"u".to_vec(),
            time_ms,
            client_info: String::new(),
        }
    }

    #[test]
    fn groups_recent_alike_entries_and_keeps_the_newest() {
        let mut log = Log::default();
        log.add(entry("get", 0), 128);
        log.add(entry("set", 1), 128);
        log.add(entry("get", 2), 128);
        assert_eq!(log.len(), 2);
        assert_eq!(log.entries[0].object, b"get");
        assert_eq!(log.entries[0].count, 2);
        log.add(entry("get", 2 + GROUPING_WINDOW_MS + 1), 128);
        assert_eq!(log.len(), 3);
        for i in 0..10 {
            log.add(entry(&format!("c{i}"), 100_000), 4);
        }
        assert_eq!(log.len(), 4);
    }
}
