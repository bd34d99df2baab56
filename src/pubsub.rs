//! Pub/sub: who is subscribed to what, and who receives a published message.
//!
//! Owns both sides of a subscription, kept in step: the server's (`PubSub`: channel →
//! subscribers, pattern → subscribers, shard channel → subscribers, as Redis's
//! `server.pubsub_*` tables) and a session's (`Subscriptions`, in its `SessionState`),
//! plus the frames a subscriber receives (`Message`) and the rule of the RESP2
//! subscribed context (`Context`).
//!
//! Subscribers are named by client id; this module never sees a session. `publish`
//! finds a message's receivers and hands each one to a callback: the engine writes the
//! running session's copy straight into its reply (where Redis puts it, before the
//! command's own reply) and sends the others through its `Host`, since the event loop
//! owns the sessions (`engine::Host::deliver`). Keyspace notifications (`crate::notify`)
//! are published through the same function, and client-side caching's invalidations
//! (`crate::tracking`) travel as `Message`s on the same path. PUBLISH changes no data:
//! nothing here is logged.

use crate::glob::glob_match;
use crate::resp::ReplyWriter;
use bytes::Bytes;
use indexmap::{IndexMap, IndexSet};

type Hasher = foldhash::fast::RandomState;
/// Client ids, in no particular order (removal swaps: O(1) for a channel with many
/// subscribers).
type Subscribers = IndexSet<u64, Hasher>;

/// The three families of subscription, each with its own commands and confirmations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE / UNSUBSCRIBE, reached by PUBLISH.
    Channel,
    /// PSUBSCRIBE / PUNSUBSCRIBE: a glob over the channels PUBLISH names.
    Pattern,
    /// SSUBSCRIBE / SUNSUBSCRIBE, reached by SPUBLISH only (Redis Cluster's shard
    /// channels; one shard here).
    Shard,
}

impl Kind {
    /// The first element of a subscription's confirmation.
    fn subscribed_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The first element of an unsubscription's confirmation.
    fn unsubscribed_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// What a session is subscribed to, in the order it subscribed (UNSUBSCRIBE without
/// arguments confirms in that order; Redis uses its table's order).
#[derive(Clone, Debug, Default)]
pub struct Subscriptions {
    channels: IndexSet<Bytes, Hasher>,
    patterns: IndexSet<Bytes, Hasher>,
    shard_channels: IndexSet<Bytes, Hasher>,
}

impl Subscriptions {
    fn of(&self, kind: Kind) -> &IndexSet<Bytes, Hasher> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard_channels,
        }
    }

    fn of_mut(&mut self, kind: Kind) -> &mut IndexSet<Bytes, Hasher> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard_channels,
        }
    }

    /// Subscriptions of one kind (CLIENT LIST's `sub=`, `psub=`, `ssub=`).
    pub fn count(&self, kind: Kind) -> usize {
        self.of(kind).len()
    }

    /// Every subscription with its kind (ACL checks them again when a user's channels
    /// change).
    pub fn iter_all(&self) -> impl Iterator<Item = (Kind, &[u8])> {
        [Kind::Channel, Kind::Pattern, Kind::Shard]
            .into_iter()
            .flat_map(move |kind| self.of(kind).iter().map(move |c| (kind, c.as_ref())))
    }

    /// The count a confirmation carries, as Redis's: channels and patterns together,
    /// shard channels on their own.
    fn confirmation_count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard_channels.len(),
        }
    }

    /// Subscribed to anything (Redis's `CLIENT_PUBSUB` flag: CLIENT LIST's `P`, the
    /// `pubsub` class of output limits).
    pub fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty())
    }
}

/// What a connection may send (Redis's rule): a RESP2 connection with a subscription
/// carries messages among its replies, so only commands whose replies a subscriber
/// expects may run. RESP3 tells pushes from replies and has no such context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Commands,
    Subscribed,
}

impl Context {
    pub fn of(resp3: bool, subscriptions: &Subscriptions) -> Context {
        if !resp3 && subscriptions.any() {
            Context::Subscribed
        } else {
            Context::Commands
        }
    }

    /// Whether command `name` may run in this context.
    pub fn allows(self, name: &str) -> bool {
        self == Context::Commands || SUBSCRIBED_COMMANDS.contains(&name)
    }
}

/// The commands a RESP2 subscriber may send.
const SUBSCRIBED_COMMANDS: &[&str] = &[
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "sunsubscribe",
    "ping",
    "quit",
    "reset",
];

/// A message pushed to a client: what a subscriber receives (a push in RESP3, an array in
/// RESP2), or a tracking client's invalidation, which in RESP2 is a pub/sub message too.
#[derive(Clone, Copy, Debug)]
pub enum Message<'a> {
    /// `message <channel> <payload>`: a channel subscription matched.
    Channel {
        channel: &'a [u8],
        payload: &'a [u8],
    },
    /// `pmessage <pattern> <channel> <payload>`.
    Pattern {
        pattern: &'a [u8],
        channel: &'a [u8],
        payload: &'a [u8],
    },
    /// `smessage <channel> <payload>`.
    Shard {
        channel: &'a [u8],
        payload: &'a [u8],
    },
    /// Client-side caching (`crate::tracking`): these keys may no longer be cached. RESP3
    /// `invalidate <keys>`; in RESP2 only for a client that invalidations are
    /// `redirected` to and that is subscribed: `message __redis__:invalidate <keys>`.
    Invalidate {
        keys: Invalidated<'a>,
        redirected: bool,
    },
    /// RESP3 only, `tracking-redir-broken <id>`: the client this one's invalidations are
    /// redirected to is gone.
    RedirectBroken { redirect: u64 },
}

/// The keys of an invalidation.
#[derive(Clone, Copy, Debug)]
pub enum Invalidated<'a> {
    Key(&'a [u8]),
    Keys(&'a [Bytes]),
    /// Every key (FLUSHDB, FLUSHALL): a null instead of the array.
    All,
}

impl Message<'_> {
    /// Writes the frame, in the protocol `out` speaks.
    pub fn write(&self, out: &mut ReplyWriter) {
        match *self {
            Message::Channel { channel, payload } => {
                out.push(3);
                out.bulk(b"message");
                out.bulk(channel);
                out.bulk(payload);
            }
            Message::Pattern {
                pattern,
                channel,
                payload,
            } => {
                out.push(4);
                out.bulk(b"pmessage");
                out.bulk(pattern);
                out.bulk(channel);
                out.bulk(payload);
            }
            Message::Shard { channel, payload } => {
                out.push(3);
                out.bulk(b"smessage");
                out.bulk(channel);
                out.bulk(payload);
            }
            Message::Invalidate { keys, .. } => {
                if out.resp3 {
                    out.push(2);
                    out.bulk(b"invalidate");
                } else {
                    out.push(3);
                    out.bulk(b"message");
                    out.bulk(crate::tracking::INVALIDATE_CHANNEL);
                }
                match keys {
                    Invalidated::Key(key) => {
                        out.array(1);
                        out.bulk(key);
                    }
                    Invalidated::Keys(keys) => out.bulk_strings(keys.iter()),
                    Invalidated::All => out.null(),
                }
            }
            Message::RedirectBroken { redirect } => {
                out.push(2);
                out.bulk(b"tracking-redir-broken");
                out.integer(redirect as i64);
            }
        }
    }

    /// Whether a client speaking RESP3 (`resp3`) or not, subscribed to something or not,
    /// can be sent this message at all (Redis's rule: RESP2 has no push frames, so only a
    /// subscriber can be told anything, and only what comes as a pub/sub message).
    pub fn reaches(&self, resp3: bool, subscribed: bool) -> bool {
        match *self {
            Message::Channel { .. } | Message::Pattern { .. } | Message::Shard { .. } => true,
            Message::Invalidate { redirected, .. } => resp3 || (redirected && subscribed),
            Message::RedirectBroken { .. } => resp3,
        }
    }
}

/// The server's side: every channel, pattern and shard channel with a subscriber, and
/// who they are. An entry goes when its last subscriber does, so unsubscribed names
/// cost nothing (Redis does the same, against abuse by millions of channels).
#[derive(Default)]
pub struct PubSub {
    channels: hashbrown::HashMap<Bytes, Subscribers>,
    /// Every pattern is matched against every published channel, in this order.
    patterns: IndexMap<Bytes, Subscribers, Hasher>,
    shard_channels: hashbrown::HashMap<Bytes, Subscribers>,
}

impl PubSub {
    /// Subscribes client `id` (whose own record is `session`) and writes the
    /// confirmation to `out`. Returns false if it already was (confirmed all the same).
    pub fn subscribe(
        &mut self,
        session: &mut Subscriptions,
        id: u64,
        kind: Kind,
        name: &[u8],
        out: &mut ReplyWriter,
    ) -> bool {
        let added = !session.of(kind).contains(name);
        if added {
            let name = Bytes::copy_from_slice(name);
            session.of_mut(kind).insert(name.clone());
            let subscribers = match kind {
                Kind::Channel => self.channels.entry(name).or_default(),
                Kind::Pattern => self.patterns.entry(name).or_default(),
                Kind::Shard => self.shard_channels.entry(name).or_default(),
            };
            subscribers.insert(id);
        }
        confirm(out, kind.subscribed_word(), Some(name), session, kind);
        added
    }

    /// Unsubscribes client `id` from `name` and writes the confirmation (sent whether or
    /// not it was subscribed, as Redis does). Returns whether it was.
    pub fn unsubscribe(
        &mut self,
        session: &mut Subscriptions,
        id: u64,
        kind: Kind,
        name: &[u8],
        out: &mut ReplyWriter,
    ) -> bool {
        let removed = self.remove(session, id, kind, name);
        confirm(out, kind.unsubscribed_word(), Some(name), session, kind);
        removed
    }

    /// Unsubscribes client `id` from everything of `kind`, confirming each name in
    /// the order subscribed; a nil name with count 0 when there was none.
    pub fn unsubscribe_all(
        &mut self,
        session: &mut Subscriptions,
        id: u64,
        kind: Kind,
        out: &mut ReplyWriter,
    ) {
        let names: Vec<Bytes> = session.of(kind).iter().cloned().collect();
        if names.is_empty() {
            confirm(out, kind.unsubscribed_word(), None, session, kind);
        }
        for name in names {
            self.unsubscribe(session, id, kind, &name, out);
        }
    }

    /// Drops every subscription of client `id`, without confirmations: it closed, or
    /// sent RESET.
    pub fn forget(&mut self, session: &mut Subscriptions, id: u64) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            let names: Vec<Bytes> = session.of(kind).iter().cloned().collect();
            for name in names {
                self.remove(session, id, kind, &name);
            }
        }
    }

    fn remove(&mut self, session: &mut Subscriptions, id: u64, kind: Kind, name: &[u8]) -> bool {
        if !session.of_mut(kind).shift_remove(name) {
            return false;
        }
        let emptied = match kind {
            Kind::Channel => remove_subscriber(&mut self.channels, name, id),
            Kind::Pattern => {
                let subscribers = self.patterns.get_mut(name).expect("both sides in step");
                subscribers.swap_remove(&id);
                subscribers.is_empty()
            }
            Kind::Shard => remove_subscriber(&mut self.shard_channels, name, id),
        };
        if emptied && kind == Kind::Pattern {
            // Keeps the other patterns' order (the order messages go out in).
            self.patterns.shift_remove(name);
        }
        true
    }

    /// Publishes `payload` on `channel` (a shard channel when `shard`): every receiver
    /// goes to `deliver` with the frame it gets. Returns the number of receivers (a
    /// client subscribed to the channel and to a matching pattern counts twice, as it
    /// receives twice). Channel subscribers first, then patterns, as Redis.
    pub fn publish(
        &self,
        channel: &[u8],
        payload: &[u8],
        shard: bool,
        deliver: &mut dyn FnMut(u64, &Message),
    ) -> usize {
        let mut receivers = 0;
        let exact = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        if let Some(subscribers) = exact.get(channel) {
            let message = if shard {
                Message::Shard { channel, payload }
            } else {
                Message::Channel { channel, payload }
            };
            for &id in subscribers {
                deliver(id, &message);
                receivers += 1;
            }
        }
        if shard {
            return receivers; // shard channels ignore patterns
        }
        for (pattern, subscribers) in &self.patterns {
            if !glob_match(pattern, channel, false) {
                continue;
            }
            let message = Message::Pattern {
                pattern,
                channel,
                payload,
            };
            for &id in subscribers {
                deliver(id, &message);
                receivers += 1;
            }
        }
        receivers
    }

    /// No subscription at all: a publish reaches nobody (notifications skip their work).
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty() && self.patterns.is_empty() && self.shard_channels.is_empty()
    }

    /// Channels (shard channels when `shard`) with a subscriber, matching `pattern` if
    /// given (PUBSUB CHANNELS / SHARDCHANNELS).
    pub fn active_channels<'a>(
        &'a self,
        shard: bool,
        pattern: Option<&'a [u8]>,
    ) -> impl Iterator<Item = &'a Bytes> + 'a {
        let table = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        table
            .keys()
            .filter(move |name| pattern.is_none_or(|p| glob_match(p, name, false)))
    }

    /// Subscribers of one channel, patterns left out (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscriber_count(&self, shard: bool, channel: &[u8]) -> usize {
        let table = if shard {
            &self.shard_channels
        } else {
            &self.channels
        };
        table.get(channel).map_or(0, IndexSet::len)
    }

    /// Channels with a subscriber (INFO `pubsub_channels`; shard ones with `shard`).
    pub fn channel_count(&self, shard: bool) -> usize {
        if shard {
            self.shard_channels.len()
        } else {
            self.channels.len()
        }
    }

    /// Patterns with a subscriber (PUBSUB NUMPAT, INFO `pubsub_patterns`).
    pub fn pattern_count(&self) -> usize {
        self.patterns.len()
    }
}

/// Removes `id` from the subscribers of `name`; returns true if that emptied it (the
/// entry is then gone).
fn remove_subscriber(
    table: &mut hashbrown::HashMap<Bytes, Subscribers>,
    name: &[u8],
    id: u64,
) -> bool {
    let subscribers = table.get_mut(name).expect("both sides in step");
    subscribers.swap_remove(&id);
    let emptied = subscribers.is_empty();
    if emptied {
        table.remove(name);
    }
    emptied
}

/// A (un)subscription's confirmation: `[word, name or nil, count]`.
fn confirm(
    out: &mut ReplyWriter,
    word: &[u8],
    name: Option<&[u8]>,
    session: &Subscriptions,
    kind: Kind,
) {
    out.push(3);
    out.bulk(word);
    match name {
        Some(name) => out.bulk(name),
        None => out.null(),
    }
    out.integer(session.confirmation_count(kind) as i64);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(resp3: bool, write: impl FnOnce(&mut ReplyWriter)) -> String {
        let mut buf = Vec::new();
        write(&mut ReplyWriter::new(&mut buf, resp3));
        String::from_utf8(buf).unwrap().replace("\r\n", " ")
    }

    #[test]
    fn confirmations_count_channels_and_patterns_together_and_shards_apart() {
        let mut pubsub = PubSub::default();
        let mut session = Subscriptions::default();
        let text = frames(false, |out| {
            pubsub.subscribe(&mut session, 1, Kind::Channel, b"a", out);
            pubsub.subscribe(&mut session, 1, Kind::Pattern, b"a*", out);
            pubsub.subscribe(&mut session, 1, Kind::Shard, b"s", out);
            pubsub.subscribe(&mut session, 1, Kind::Channel, b"a", out);
        });
        assert_eq!(
            text,
            "*3 $9 subscribe $1 a :1 *3 $10 psubscribe $2 a* :2 \
             *3 $10 ssubscribe $1 s :1 *3 $9 subscribe $1 a :2 "
        );
        assert_eq!(Context::of(false, &session), Context::Subscribed);
        assert_eq!(Context::of(true, &session), Context::Commands);
        let text = frames(true, |out| {
            pubsub.unsubscribe_all(&mut session, 1, Kind::Channel, out);
            pubsub.unsubscribe_all(&mut session, 1, Kind::Channel, out);
        });
        assert_eq!(
            text, ">3 $11 unsubscribe $1 a :1 >3 $11 unsubscribe _ :1 ",
            "the pattern still counts; nothing left gives a nil"
        );
        pubsub.forget(&mut session, 1);
        assert!(pubsub.is_empty());
        assert!(!session.any());
    }

    #[test]
    fn publish_reaches_channel_then_pattern_subscribers_and_counts_each_copy() {
        let mut pubsub = PubSub::default();
        let mut sessions = [Subscriptions::default(), Subscriptions::default()];
        let mut sink = Vec::new();
        let mut out = ReplyWriter::new(&mut sink, false);
        pubsub.subscribe(&mut sessions[0], 1, Kind::Channel, b"news", &mut out);
        pubsub.subscribe(&mut sessions[0], 1, Kind::Pattern, b"n*", &mut out);
        pubsub.subscribe(&mut sessions[1], 2, Kind::Pattern, b"n*", &mut out);
        pubsub.subscribe(&mut sessions[1], 2, Kind::Shard, b"news", &mut out);
        let mut got = Vec::new();
        let receivers = pubsub.publish(b"news", b"hi", false, &mut |id, message| {
            got.push((id, frames(false, |out| message.write(out))));
        });
        assert_eq!(receivers, 3);
        assert_eq!(
            got,
            [
                (1, "*3 $7 message $4 news $2 hi ".to_string()),
                (1, "*4 $8 pmessage $2 n* $4 news $2 hi ".to_string()),
                (2, "*4 $8 pmessage $2 n* $4 news $2 hi ".to_string()),
            ]
        );
        got.clear();
        let receivers = pubsub.publish(b"news", b"x", true, &mut |id, message| {
            got.push((id, frames(true, |out| message.write(out))));
        });
        assert_eq!(receivers, 1, "shard channels ignore patterns");
        assert_eq!(got, [(2, ">3 $8 smessage $4 news $1 x ".to_string())]);
        assert_eq!(pubsub.pattern_count(), 1);
        pubsub.forget(&mut sessions[0], 1);
        assert_eq!(pubsub.pattern_count(), 1);
        assert_eq!(pubsub.subscriber_count(false, b"news"), 0);
        assert_eq!(pubsub.channel_count(false), 0);
        pubsub.forget(&mut sessions[1], 2);
        assert!(pubsub.is_empty());
    }
}
