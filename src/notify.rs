//! Keyspace notifications (Redis's `notify.c`): a change to a key, published as pub/sub
//! messages on `__keyspace@<db>__:<key>` (the event's name as payload) and
//! `__keyevent@<db>__:<event>` (the key as payload).
//!
//! Owns the classes of events and `notify-keyspace-events`, the configuration that says
//! which classes are published and on which of the two channels (Redis's letters
//! `KEg$lshzxetmdnA`, parsed and printed as Redis does). Events are raised where the
//! change happens: each command handler names its event (`Ctx::notify`, with Redis 7.0's
//! event name for that command), expirations raise `expired` where they are found (on
//! access, and by the active cycle), evictions `evicted`. They go out through
//! `pubsub::PubSub::publish`, the path PUBLISH takes.

use crate::pubsub::{Message, PubSub};

/// The class of an event: which letter of `notify-keyspace-events` publishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventClass {
    /// `g`: commands that work on any type (DEL, EXPIRE, RENAME…).
    Generic,
    /// `$`
    String,
    /// `l`
    List,
    /// `s`
    Set,
    /// `h`
    Hash,
    /// `z`
    ZSet,
    /// `t`
    Stream,
    /// `x`: a key expired (found on access or by the active cycle).
    Expired,
    /// `e`: a key was evicted under `maxmemory` (`engine::evict`).
    Evicted,
    /// `m`: a read found no key (not part of `A`).
    KeyMiss,
    /// `n`: a key was created (not part of `A`).
    New,
}

impl EventClass {
    fn bit(self) -> u32 {
        match self {
            EventClass::Generic => GENERIC,
            EventClass::String => STRING,
            EventClass::List => LIST,
            EventClass::Set => SET,
            EventClass::Hash => HASH,
            EventClass::ZSet => ZSET,
            EventClass::Stream => STREAM,
            EventClass::Expired => EXPIRED,
            EventClass::Evicted => EVICTED,
            EventClass::KeyMiss => KEY_MISS,
            EventClass::New => NEW,
        }
    }
}

// Redis's NOTIFY_* bits.
const KEYSPACE: u32 = 1 << 0;
const KEYEVENT: u32 = 1 << 1;
const GENERIC: u32 = 1 << 2;
const STRING: u32 = 1 << 3;
const LIST: u32 = 1 << 4;
const SET: u32 = 1 << 5;
const HASH: u32 = 1 << 6;
const ZSET: u32 = 1 << 7;
const EXPIRED: u32 = 1 << 8;
const EVICTED: u32 = 1 << 9;
const STREAM: u32 = 1 << 10;
const KEY_MISS: u32 = 1 << 11;
const MODULE: u32 = 1 << 13;
const NEW: u32 = 1 << 14;
/// `A`: every type class; `m` and `n` are left out on purpose (as in Redis).
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The letters and their classes, in the order Redis prints them (`A` aside).
const CLASS_LETTERS: &[(char, u32)] = &[
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
    ('n', NEW),
];

/// `notify-keyspace-events`: the classes published, and on which channels. Off (empty)
/// by default, as in Redis. Modules (`d`) are accepted, but Tessera has none to notify.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyspaceEvents(u32);

/// A letter `notify-keyspace-events` does not know.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")]
pub struct InvalidEventClass;

impl KeyspaceEvents {
    /// Redis's `keyspaceEventsStringToFlags`.
    pub fn parse(text: &str) -> Result<KeyspaceEvents, InvalidEventClass> {
        let mut flags = 0;
        for letter in text.chars() {
            flags |= match letter {
                'A' => ALL,
                'K' => KEYSPACE,
                'E' => KEYEVENT,
                'm' => KEY_MISS,
                other => CLASS_LETTERS
                    .iter()
                    .find(|(l, _)| *l == other)
                    .map(|(_, bit)| *bit)
                    .ok_or(InvalidEventClass)?,
            };
        }
        Ok(KeyspaceEvents(flags))
    }

    /// Whether an event of `class` is published at all: its class is on, and so is one
    /// of the two channels.
    pub fn publishes(self, class: EventClass) -> bool {
        self.0 & class.bit() != 0 && self.0 & (KEYSPACE | KEYEVENT) != 0
    }
}

impl std::fmt::Display for KeyspaceEvents {
    /// Redis's `keyspaceEventsFlagsToString`, quirk included: with every class of `A`
    /// on, only `A` is printed, so an `n` beside it is not shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut text = String::new();
        if self.0 & ALL == ALL {
            text.push('A');
        } else {
            for (letter, bit) in CLASS_LETTERS {
                if self.0 & bit != 0 {
                    text.push(*letter);
                }
            }
        }
        for (letter, bit) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
            if self.0 & bit != 0 {
                text.push(letter);
            }
        }
        f.write_str(&text)
    }
}

/// Publishes event `event` of `class` on `key` in database `db`, if `events` says so:
/// on `__keyspace@<db>__:<key>` then `__keyevent@<db>__:<event>`. Each receiver goes to
/// `deliver`, as with PUBLISH.
pub fn keyspace_event(
    events: KeyspaceEvents,
    pubsub: &PubSub,
    class: EventClass,
    event: &str,
    key: &[u8],
    db: usize,
    deliver: &mut dyn FnMut(u64, &Message),
) {
    // Nobody subscribed: nobody could tell the messages were never built.
    if !events.publishes(class) || pubsub.is_empty() {
        return;
    }
    let mut db_text = itoa::Buffer::new();
    let db_text = db_text.format(db).as_bytes();
    if events.0 & KEYSPACE != 0 {
        let channel = [b"__keyspace@", db_text, b"__:", key].concat();
        pubsub.publish(&channel, event.as_bytes(), false, deliver);
    }
    if events.0 & KEYEVENT != 0 {
        let channel = [b"__keyevent@", db_text, b"__:", event.as_bytes()].concat();
        pubsub.publish(&channel, key, false, deliver);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pubsub::{Kind, Subscriptions};
    use crate::resp::ReplyWriter;

    #[test]
    fn flags_parse_and_print_as_redis_does() {
        let cases = [
            ("", ""),
            ("KEA", "AKE"),
            ("KEAnm", "AKEm"), // Redis hides the n beside A
            ("Eglshzxetd$", "AE"),
            ("Kx", "xK"),
            ("mK", "Km"),
            ("E$lh", "$lhE"),
            ("nd", "dn"),
        ];
        for (given, printed) in cases {
            let events = KeyspaceEvents::parse(given).unwrap();
            assert_eq!(events.to_string(), printed, "{given}");
        }
        assert_eq!(KeyspaceEvents::parse("KEQ"), Err(InvalidEventClass));
        assert_eq!(KeyspaceEvents::parse("k"), Err(InvalidEventClass));
        let events = KeyspaceEvents::parse("Kg").unwrap();
        assert!(events.publishes(EventClass::Generic));
        assert!(!events.publishes(EventClass::String));
        assert!(
            !KeyspaceEvents::parse("g")
                .unwrap()
                .publishes(EventClass::Generic)
        );
        assert!(
            !KeyspaceEvents::parse("KEA")
                .unwrap()
                .publishes(EventClass::New)
        );
    }

    #[test]
    fn an_event_goes_to_the_keyspace_then_the_keyevent_channel() {
        let mut pubsub = PubSub::default();
        let mut session = Subscriptions::default();
        let mut sink = Vec::new();
        let mut out = ReplyWriter::new(&mut sink, false);
        pubsub.subscribe(&mut session, 7, Kind::Pattern, b"__key*__:*", &mut out);
        let mut got = Vec::new();
        let events = KeyspaceEvents::parse("KEA").unwrap();
        let mut record = |id: u64, message: &Message| {
            let mut buf = Vec::new();
            message.write(&mut ReplyWriter::new(&mut buf, false));
            got.push((id, String::from_utf8(buf).unwrap().replace("\r\n", " ")));
        };
        keyspace_event(
            events,
            &pubsub,
            EventClass::String,
            "set",
            b"k",
            3,
            &mut record,
        );
        keyspace_event(
            events,
            &pubsub,
            EventClass::New,
            "new",
            b"k",
            3,
            &mut record,
        );
        assert_eq!(
            got,
            [
                (
                    7,
                    "*4 $8 pmessage $10 __key*__:* $16 __keyspace@3__:k $3 set ".to_string()
                ),
                (
                    7,
                    "*4 $8 pmessage $10 __key*__:* $18 __keyevent@3__:set $1 k ".to_string()
                ),
            ]
        );
    }
}
