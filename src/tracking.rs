//! Server-assisted client-side caching (CLIENT TRACKING), with Redis 7.0's semantics
//! (its `tracking.c`).
//!
//! Owns who tracks and what each is told about: every tracking client's options
//! (`ClientTracking`: its `Mode`, REDIRECT, NOLOOP, the CLIENT CACHING flag), the **key
//! table** (key name → the clients that may hold it in their cache, filled by their
//! read-only commands) and the **prefix table** (BCAST: prefix → its clients, and the keys
//! changed under it since the last broadcast). Keys are names only, across databases, as
//! in Redis: a change to `k` in any database invalidates every cached `k`.
//!
//! It never sees a session. Messages leave through a callback `(client id, &Message) ->
//! delivered` that the engine provides (`Origin::route`: the running client's own wait
//! for its reply, the others go through `Host::deliver`); a delivery that finds no such
//! client is how a broken redirect is noticed. A key read is remembered after the command
//! (`Tracking::remember`), a change invalidates at once for the key table
//! (`Tracking::key_changed`) and at the end of the event loop's turn for BCAST
//! (`Tracking::broadcast`), as Redis sends those in its before-sleep step.
//!
//! A client's id stays in the key table after it stops tracking or leaves: it is dropped
//! when the key changes (Redis removes them lazily too, so that a client with millions of
//! cached keys costs nothing to close). A client that tracks again meanwhile is told of
//! those keys, as in Redis.

use crate::engine::Host;
use crate::pubsub::{Invalidated, Message};
use crate::resp::ReplyWriter;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// The channel on which a RESP2 client that invalidations are redirected to receives
/// them (it must be subscribed to something: pub/sub is RESP2's only way to push).
pub const INVALIDATE_CHANNEL: &[u8] = b"__redis__:invalidate";

/// How many keys one pass of `limit_keys` may evict, per pass in a row that found the
/// table still over `tracking-table-max-keys` (Redis's effort: it grows while the table
/// stays too big, and starts again once it fits).
const EVICTION_EFFORT_KEYS: u32 = 100;

/// How a tracking client learns of changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The keys its read-only commands read are remembered for it (the default mode);
    /// `Reads` says which reads count.
    Keys(Reads),
    /// BCAST: told of every changed key under one of its prefixes (the empty prefix is
    /// every key); nothing is remembered.
    Broadcast(BTreeSet<Bytes>),
}

/// Which reads of a client in the default mode are remembered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    All,
    /// OPTIN: only those of the command (or transaction) after CLIENT CACHING yes.
    OptIn,
    /// OPTOUT: all but those of the command (or transaction) after CLIENT CACHING no.
    OptOut,
}

/// One tracking client's options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTracking {
    pub mode: Mode,
    /// REDIRECT: the client that receives this one's invalidations.
    pub redirect: Option<u64>,
    /// NOLOOP: not told of the keys it changed itself.
    pub noloop: bool,
    /// The redirect client was gone when a message was due (CLIENT LIST's `R`,
    /// TRACKINGINFO's `broken_redirect`); it stays until tracking is enabled again.
    pub broken_redirect: bool,
    /// CLIENT CACHING was given: it applies to the next command, or to the whole
    /// transaction when that command is MULTI.
    pub caching: bool,
}

impl ClientTracking {
    pub fn is_broadcast(&self) -> bool {
        matches!(self.mode, Mode::Broadcast(_))
    }

    fn reads(&self) -> Option<Reads> {
        match self.mode {
            Mode::Keys(reads) => Some(reads),
            Mode::Broadcast(_) => None,
        }
    }

    /// Whether this client's next read is remembered.
    fn remembers_reads(&self) -> bool {
        match self.reads() {
            Some(Reads::All) => true,
            Some(Reads::OptIn) => self.caching,
            Some(Reads::OptOut) => !self.caching,
            None => false,
        }
    }

    /// CLIENT LIST's tracking letters, in Redis's order: `t` tracking, `R` broken
    /// redirect, `B` broadcast.
    pub fn flag_letters(&self) -> String {
        let mut letters = String::from("t");
        if self.broken_redirect {
            letters.push('R');
        }
        if self.is_broadcast() {
            letters.push('B');
        }
        letters
    }

    /// CLIENT TRACKINGINFO's `flags`, in Redis's order (`on` first).
    pub fn info_flags(&self) -> Vec<&'static str> {
        let mut flags = vec!["on"];
        match self.mode {
            Mode::Broadcast(_) => flags.push("bcast"),
            Mode::Keys(Reads::OptIn) => {
                flags.push("optin");
                if self.caching {
                    flags.push("caching-yes");
                }
            }
            Mode::Keys(Reads::OptOut) => {
                flags.push("optout");
                if self.caching {
                    flags.push("caching-no");
                }
            }
            Mode::Keys(Reads::All) => {}
        }
        if self.noloop {
            flags.push("noloop");
        }
        if self.broken_redirect {
            flags.push("broken_redirect");
        }
        flags
    }
}

/// What CLIENT TRACKING ON asked for (its arguments parsed; the redirect client checked).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub redirect: Option<u64>,
    pub broadcast: bool,
    pub prefixes: Vec<Bytes>,
    pub opt_in: bool,
    pub opt_out: bool,
    pub noloop: bool,
}

/// Why CLIENT TRACKING or CLIENT CACHING was refused (Redis 7.0's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrackingError {
    #[error("ERR A client can only redirect to a single other client")]
    SecondRedirect,
    #[error("ERR The client ID you want redirect to does not exist")]
    NoSuchRedirect,
    #[error("ERR PREFIX option requires BCAST mode to be enabled")]
    PrefixWithoutBroadcast,
    #[error(
        "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    )]
    BroadcastSwitch,
    #[error("ERR OPTIN and OPTOUT are not compatible with BCAST")]
    OptWithBroadcast,
    #[error("ERR You can't specify both OPTIN mode and OPTOUT mode")]
    OptInAndOptOut,
    #[error(
        "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
    )]
    OptSwitch,
    #[error(
        "ERR Prefix '{given}' overlaps with an existing prefix '{existing}'. Prefixes for a single client must not overlap."
    )]
    PrefixOverlapsExisting { given: String, existing: String },
    #[error(
        "ERR Prefix '{first}' overlaps with another provided prefix '{second}'. Prefixes for a single client must not overlap."
    )]
    PrefixesOverlap { first: String, second: String },
    #[error(
        "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
    )]
    CachingWithoutTracking,
    #[error("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")]
    CachingYesWithoutOptIn,
    #[error("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")]
    CachingNoWithoutOptOut,
}

/// A prefix of the BCAST table: who registered it, and the keys changed under it since
/// the last broadcast, each with the client that changed it last (None: an expiry), so
/// that a NOLOOP client is not told of its own.
#[derive(Default)]
struct Broadcast {
    clients: BTreeSet<u64>,
    changed: BTreeMap<Bytes, Option<u64>>,
}

/// Sends a message for a client, returning false when no such client is connected.
pub type Deliver<'a> = dyn FnMut(u64, &Message<'_>) -> bool + 'a;

/// The tracking state of the server.
#[derive(Default)]
pub struct Tracking {
    clients: hashbrown::HashMap<u64, ClientTracking>,
    /// Key → the clients that may cache it. An index map, so that eviction
    /// (`tracking-table-max-keys`) can pick a key at random.
    keys: indexmap::IndexMap<Bytes, BTreeSet<u64>, foldhash::fast::RandomState>,
    /// Client ids across the key table (INFO's `tracking_total_items`).
    items: usize,
    /// BCAST prefixes, in byte order (the order of Redis's radix tree, which decides the
    /// order of the messages and of TRACKINGINFO's prefixes).
    prefixes: BTreeMap<Bytes, Broadcast>,
    /// Passes of `limit_keys` in a row that left the table over its limit.
    eviction_rounds: u32,
}

impl Tracking {
    /// The options of client `id`, if it tracks.
    pub fn client(&self, id: u64) -> Option<&ClientTracking> {
        self.clients.get(&id)
    }

    /// INFO's `tracking_clients`.
    pub fn client_count(&self) -> usize {
        self.clients.len()
    }

    /// INFO's `tracking_total_keys`.
    pub fn total_keys(&self) -> usize {
        self.keys.len()
    }

    /// INFO's `tracking_total_items`.
    pub fn total_items(&self) -> usize {
        self.items
    }

    /// INFO's `tracking_total_prefixes`.
    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// Whether a key's change can concern anyone (a key remembered, or a prefix
    /// registered): most servers track nothing, and pay nothing per write.
    pub fn watches_changes(&self) -> bool {
        !self.keys.is_empty() || !self.prefixes.is_empty()
    }

    /// CLIENT TRACKING ON for client `id`, checked in Redis's order. Enabling again
    /// replaces the options (REDIRECT, OPTIN/OPTOUT, NOLOOP), clears a broken redirect and
    /// adds prefixes to those a BCAST client has.
    pub fn enable(&mut self, id: u64, options: Options) -> Result<(), TrackingError> {
        if !options.broadcast && !options.prefixes.is_empty() {
            return Err(TrackingError::PrefixWithoutBroadcast);
        }
        let current = self.clients.get(&id);
        if current.is_some_and(|c| c.is_broadcast() != options.broadcast) {
            return Err(TrackingError::BroadcastSwitch);
        }
        if options.broadcast && (options.opt_in || options.opt_out) {
            return Err(TrackingError::OptWithBroadcast);
        }
        if options.opt_in && options.opt_out {
            return Err(TrackingError::OptInAndOptOut);
        }
        let current_reads = current.and_then(ClientTracking::reads);
        if (options.opt_in && current_reads == Some(Reads::OptOut))
            || (options.opt_out && current_reads == Some(Reads::OptIn))
        {
            return Err(TrackingError::OptSwitch);
        }
        let mut prefixes = match current.map(|c| &c.mode) {
            Some(Mode::Broadcast(prefixes)) => prefixes.clone(),
            _ => BTreeSet::new(),
        };
        if options.broadcast {
            check_prefix_collisions(&prefixes, &options.prefixes)?;
        }
        // Redis keeps a CLIENT CACHING given before enabling again.
        let caching = current.is_some_and(|c| c.caching);
        let mode = if options.broadcast {
            let added: Vec<Bytes> = if options.prefixes.is_empty() {
                vec![Bytes::new()]
            } else {
                options.prefixes
            };
            for prefix in added {
                self.prefixes
                    .entry(prefix.clone())
                    .or_default()
                    .clients
                    .insert(id);
                prefixes.insert(prefix);
            }
            Mode::Broadcast(prefixes)
        } else if options.opt_in {
            Mode::Keys(Reads::OptIn)
        } else if options.opt_out {
            Mode::Keys(Reads::OptOut)
        } else {
            Mode::Keys(Reads::All)
        };
        self.clients.insert(
            id,
            ClientTracking {
                mode,
                redirect: options.redirect,
                noloop: options.noloop,
                broken_redirect: false,
                caching,
            },
        );
        Ok(())
    }

    /// CLIENT TRACKING OFF, RESET, or the client closed: its options and prefixes go (its
    /// id leaves the key table lazily).
    pub fn disable(&mut self, id: u64) {
        let Some(client) = self.clients.remove(&id) else {
            return;
        };
        if let Mode::Broadcast(prefixes) = client.mode {
            for prefix in prefixes {
                if let Some(broadcast) = self.prefixes.get_mut(&prefix) {
                    broadcast.clients.remove(&id);
                    if broadcast.clients.is_empty() {
                        self.prefixes.remove(&prefix);
                    }
                }
            }
        }
    }

    /// CLIENT CACHING YES (`yes`) or NO.
    pub fn set_caching(&mut self, id: u64, yes: bool) -> Result<(), TrackingError> {
        let client = self
            .clients
            .get_mut(&id)
            .ok_or(TrackingError::CachingWithoutTracking)?;
        match (yes, client.reads()) {
            (true, Some(Reads::OptIn)) | (false, Some(Reads::OptOut)) => {
                client.caching = true;
                Ok(())
            }
            (true, _) => Err(TrackingError::CachingYesWithoutOptIn),
            (false, _) => Err(TrackingError::CachingNoWithoutOptOut),
        }
    }

    /// Whether client `id` has a CLIENT CACHING pending.
    pub fn has_caching(&self, id: u64) -> bool {
        self.clients.get(&id).is_some_and(|c| c.caching)
    }

    /// A client's command (outside a transaction) is over: its CLIENT CACHING no longer
    /// applies. (The engine keeps it across CLIENT commands and inside MULTI, as Redis's
    /// `resetClient` does.)
    pub fn command_done(&mut self, id: u64) {
        if let Some(client) = self.clients.get_mut(&id) {
            client.caching = false;
        }
    }

    /// Whether client `id`'s reads are remembered now (it tracks in the default mode and
    /// OPTIN/OPTOUT let this command's reads count).
    pub fn remembers_reads(&self, id: u64) -> bool {
        self.clients.get(&id).is_some_and(|c| c.remembers_reads())
    }

    /// Remembers that client `id` read `keys` (Redis's `trackingRememberKeys`), if its
    /// mode says this read counts.
    pub fn remember<'k>(&mut self, id: u64, keys: impl IntoIterator<Item = &'k [u8]>) {
        if !self.remembers_reads(id) {
            return;
        }
        for key in keys {
            let readers = match self.keys.get_mut(key) {
                Some(readers) => readers,
                None => self.keys.entry(Bytes::copy_from_slice(key)).or_default(),
            };
            if readers.insert(id) {
                self.items += 1;
            }
        }
    }

    /// `key` changed (Redis's `trackingInvalidateKey`): every client that may cache it is
    /// told once, and forgotten for it; the BCAST prefixes it falls under note it for the
    /// next broadcast. `changed_by`: the client whose command changed it (None for an
    /// expiry), for BCAST's NOLOOP; `running`: the client whose request is running, which a
    /// NOLOOP client in the default mode is not told about.
    pub fn key_changed(
        &mut self,
        key: &[u8],
        changed_by: Option<u64>,
        running: Option<u64>,
        out: &mut Deliver,
    ) {
        for (prefix, broadcast) in self.prefixes.iter_mut() {
            if key.starts_with(prefix) {
                broadcast
                    .changed
                    .insert(Bytes::copy_from_slice(key), changed_by);
            }
        }
        self.invalidate_readers(key, running, out);
    }

    /// Tells the key table's readers of `key` and forgets them for it.
    fn invalidate_readers(&mut self, key: &[u8], running: Option<u64>, out: &mut Deliver) {
        let Some(readers) = self.keys.swap_remove(key) else {
            return;
        };
        self.items -= readers.len();
        for id in readers {
            let Some(client) = self.clients.get(&id) else {
                continue; // no longer tracking
            };
            // A client now in BCAST mode is not told of keys it read before.
            if client.is_broadcast() || (client.noloop && running == Some(id)) {
                continue;
            }
            send(&mut self.clients, id, Invalidated::Key(key), out);
        }
    }

    /// FLUSHDB / FLUSHALL (Redis's `trackingInvalidateKeysOnFlush`): every tracking client,
    /// whatever its mode, is told that every key is invalid (a null), and the key table
    /// is emptied.
    pub fn flushed(&mut self, out: &mut Deliver) {
        let mut ids: Vec<u64> = self.clients.keys().copied().collect();
        ids.sort_unstable(); // Redis goes through its clients in connection order
        for id in ids {
            send(&mut self.clients, id, Invalidated::All, out);
        }
        self.keys.clear();
        self.items = 0;
    }

    /// Sends each BCAST prefix's changed keys to its clients, in one message per prefix
    /// and client (Redis's `trackingBroadcastInvalidationMessages`, before the event loop
    /// sleeps). A NOLOOP client gets the keys others changed, or nothing.
    pub fn broadcast(&mut self, out: &mut Deliver) {
        for broadcast in self.prefixes.values_mut() {
            if broadcast.changed.is_empty() {
                continue;
            }
            let changed = std::mem::take(&mut broadcast.changed);
            let every_key: Vec<Bytes> = changed.keys().cloned().collect();
            for &id in &broadcast.clients {
                let noloop = self.clients.get(&id).is_some_and(|c| c.noloop);
                if noloop {
                    let others: Vec<Bytes> = changed
                        .iter()
                        .filter(|(_, by)| **by != Some(id))
                        .map(|(key, _)| key.clone())
                        .collect();
                    if !others.is_empty() {
                        send(&mut self.clients, id, Invalidated::Keys(&others), out);
                    }
                } else {
                    send(&mut self.clients, id, Invalidated::Keys(&every_key), out);
                }
            }
        }
    }

    /// Keeps the key table within `max_keys` (`tracking-table-max-keys`; 0: no limit) by
    /// forgetting keys at random, each as if it changed, so that its readers drop it from
    /// their caches rather than miss a later change (Redis's `trackingLimitUsedSlots`).
    pub fn limit_keys(&mut self, max_keys: u64, running: Option<u64>, out: &mut Deliver) {
        if max_keys == 0 || self.keys.len() as u64 <= max_keys {
            self.eviction_rounds = 0;
            return;
        }
        let effort = EVICTION_EFFORT_KEYS.saturating_mul(self.eviction_rounds + 1);
        for _ in 0..effort {
            if self.keys.is_empty() {
                break;
            }
            let index = rand::random_range(0..self.keys.len());
            let key = self.keys.get_index(index).expect("in range").0.clone();
            self.invalidate_readers(&key, running, out);
            if self.keys.len() as u64 <= max_keys {
                self.eviction_rounds = 0;
                return;
            }
        }
        self.eviction_rounds += 1;
    }
}

/// Sends an invalidation meant for tracking client `target` (Redis's
/// `sendTrackingMessage`): to it, or to its redirect client. When that one is gone the
/// target's redirect is marked broken and it is told so (a RESP3 push; a RESP2 client
/// cannot be told).
fn send(
    clients: &mut hashbrown::HashMap<u64, ClientTracking>,
    target: u64,
    keys: Invalidated<'_>,
    out: &mut Deliver,
) {
    let Some(client) = clients.get_mut(&target) else {
        return;
    };
    match client.redirect {
        None => {
            out(
                target,
                &Message::Invalidate {
                    keys,
                    redirected: false,
                },
            );
        }
        Some(redirect) => {
            let message = Message::Invalidate {
                keys,
                redirected: true,
            };
            if !out(redirect, &message) {
                client.broken_redirect = true;
                out(target, &Message::RedirectBroken { redirect });
            }
        }
    }
}

/// Redis's overlap rule for a BCAST client's prefixes: two prefixes overlap when one
/// starts the other (both would announce the same key). Each given prefix is checked
/// against the client's existing ones, then against the given ones after it.
fn check_prefix_collisions(
    existing: &BTreeSet<Bytes>,
    given: &[Bytes],
) -> Result<(), TrackingError> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    for (i, prefix) in given.iter().enumerate() {
        if let Some(other) = existing.iter().find(|e| overlap(e, prefix)) {
            return Err(TrackingError::PrefixOverlapsExisting {
                given: c_text(prefix),
                existing: c_text(other),
            });
        }
        if let Some(other) = given[i + 1..].iter().find(|o| overlap(prefix, o)) {
            return Err(TrackingError::PrefixesOverlap {
                first: c_text(prefix),
                second: c_text(other),
            });
        }
    }
    Ok(())
}

/// A prefix as Redis's `%s` prints it: up to its first NUL byte.
fn c_text(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The client whose request is running, as tracking's messages see it: what is meant for
/// it waits in `messages` and follows its reply, as Redis sends the invalidations of the
/// running client's own changes after the command (its pending invalidations): a reply
/// never arrives after the invalidation of the value it carries.
pub struct Origin {
    pub id: u64,
    resp3: bool,
    subscribed: bool,
    pub messages: Vec<u8>,
}

impl Origin {
    pub fn new(id: u64, resp3: bool, subscribed: bool) -> Origin {
        Origin {
            id,
            resp3,
            subscribed,
            messages: Vec::new(),
        }
    }

    /// Delivers `message` for client `id`: into the origin's waiting messages when it is
    /// the origin, else through the host. False when no such client is connected.
    pub fn route(
        origin: Option<&mut Origin>,
        host: &mut dyn Host,
        id: u64,
        message: &Message<'_>,
    ) -> bool {
        match origin {
            Some(origin) if origin.id == id => {
                if message.reaches(origin.resp3, origin.subscribed) {
                    message.write(&mut ReplyWriter::new(&mut origin.messages, origin.resp3));
                }
                true
            }
            _ => host.deliver(id, message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Sent = Vec<(u64, String)>;

    fn recorder(
        sent: &mut Sent,
        connected: &'static [u64],
    ) -> impl FnMut(u64, &Message<'_>) -> bool {
        move |id, message| {
            if !connected.contains(&id) {
                return false;
            }
            let mut bytes = Vec::new();
            message.write(&mut ReplyWriter::new(&mut bytes, true));
            sent.push((id, String::from_utf8_lossy(&bytes).replace("\r\n", " ")));
            true
        }
    }

    fn keys_mode() -> Options {
        Options::default()
    }

    #[test]
    fn a_read_key_is_invalidated_once_then_forgotten() {
        let mut tracking = Tracking::default();
        tracking.enable(1, keys_mode()).unwrap();
        tracking.remember(1, [b"k".as_slice(), b"k".as_slice()]);
        assert_eq!((tracking.total_keys(), tracking.total_items()), (1, 1));
        let mut sent = Sent::new();
        tracking.key_changed(b"k", Some(2), Some(2), &mut recorder(&mut sent, &[1, 2]));
        tracking.key_changed(b"k", Some(2), Some(2), &mut recorder(&mut sent, &[1, 2]));
        assert_eq!(sent, vec![(1, ">2 $10 invalidate *1 $1 k ".to_string())]);
        assert_eq!((tracking.total_keys(), tracking.total_items()), (0, 0));
    }

    #[test]
    fn noloop_skips_the_running_client_and_optin_needs_caching() {
        let mut tracking = Tracking::default();
        let noloop = Options {
            noloop: true,
            ..Options::default()
        };
        tracking.enable(1, noloop).unwrap();
        tracking.remember(1, [b"k".as_slice()]);
        let mut sent = Sent::new();
        tracking.key_changed(b"k", Some(1), Some(1), &mut recorder(&mut sent, &[1]));
        assert!(sent.is_empty());
        let opt_in = Options {
            opt_in: true,
            ..Options::default()
        };
        tracking.enable(2, opt_in).unwrap();
        tracking.remember(2, [b"a".as_slice()]);
        assert_eq!(tracking.total_keys(), 0);
        tracking.set_caching(2, true).unwrap();
        tracking.remember(2, [b"a".as_slice()]);
        assert_eq!(tracking.total_keys(), 1);
        tracking.command_done(2);
        assert!(!tracking.remembers_reads(2));
    }

    #[test]
    fn a_gone_redirect_is_reported_to_the_tracking_client() {
        let mut tracking = Tracking::default();
        let options = Options {
            redirect: Some(9),
            ..Options::default()
        };
        tracking.enable(1, options).unwrap();
        tracking.remember(1, [b"k".as_slice()]);
        let mut sent = Sent::new();
        tracking.key_changed(b"k", None, None, &mut recorder(&mut sent, &[1]));
        assert_eq!(
            sent,
            vec![(1, ">2 $21 tracking-redir-broken :9 ".to_string())]
        );
        assert!(tracking.client(1).unwrap().broken_redirect);
        assert_eq!(tracking.client(1).unwrap().flag_letters(), "tR");
    }

    #[test]
    fn broadcast_batches_changed_keys_per_prefix_and_noloop_filters_its_own() {
        let mut tracking = Tracking::default();
        let prefixes = |list: &[&'static str], noloop| Options {
            broadcast: true,
            prefixes: list
                .iter()
                .map(|p| Bytes::from_static(p.as_bytes()))
                .collect(),
            noloop,
            ..Options::default()
        };
        tracking.enable(1, prefixes(&["a", "b"], false)).unwrap();
        tracking.enable(2, prefixes(&["a"], true)).unwrap();
        assert_eq!(tracking.total_prefixes(), 2);
        let mut sent = Sent::new();
        let mut out = recorder(&mut sent, &[1, 2]);
        tracking.key_changed(b"a2", Some(2), Some(2), &mut out);
        tracking.key_changed(b"a1", Some(3), Some(3), &mut out);
        tracking.key_changed(b"c", Some(3), Some(3), &mut out);
        tracking.broadcast(&mut out);
        tracking.broadcast(&mut out);
        drop(out);
        assert_eq!(
            sent,
            vec![
                (1, ">2 $10 invalidate *2 $2 a1 $2 a2 ".to_string()),
                (2, ">2 $10 invalidate *1 $2 a1 ".to_string()),
            ]
        );
        tracking.disable(2);
        tracking.disable(1);
        assert_eq!(tracking.total_prefixes(), 0);
    }

    #[test]
    fn prefixes_that_start_one_another_are_refused() {
        let mut tracking = Tracking::default();
        let options = |list: &[&'static str]| Options {
            broadcast: true,
            prefixes: list
                .iter()
                .map(|p| Bytes::from_static(p.as_bytes()))
                .collect(),
            ..Options::default()
        };
        assert_eq!(
            tracking.enable(1, options(&["ab", "a"])),
            Err(TrackingError::PrefixesOverlap {
                first: "ab".into(),
                second: "a".into()
            })
        );
        tracking.enable(1, options(&["x"])).unwrap();
        assert_eq!(
            tracking.enable(1, options(&["xy"])),
            Err(TrackingError::PrefixOverlapsExisting {
                given: "xy".into(),
                existing: "x".into()
            })
        );
    }

    #[test]
    fn the_key_table_is_kept_within_its_limit() {
        let mut tracking = Tracking::default();
        tracking.enable(1, keys_mode()).unwrap();
        let keys: Vec<Vec<u8>> = (0..10).map(|i| format!("k{i}").into_bytes()).collect();
        tracking.remember(1, keys.iter().map(Vec::as_slice));
        let mut sent = Sent::new();
        tracking.limit_keys(4, None, &mut recorder(&mut sent, &[1]));
        assert_eq!(tracking.total_keys(), 4);
        assert_eq!(sent.len(), 6);
        tracking.limit_keys(0, None, &mut recorder(&mut sent, &[1]));
        assert_eq!(tracking.total_keys(), 4);
    }
}
