//! The command table and the context a command runs in.
//!
//! A command is a row of a declarative table (name, arity, flags); its handler runs
//! against the keyspace and writes its reply through a `ReplyWriter`. It never touches a
//! socket. What must be logged it hands to `Ctx::propagate`, in the deterministic form
//! that replays to the same state (absolute expiry times, the effect rather than the
//! request where they differ), which records it in the effects stream (`crate::effects`).
//!
//! Handlers are only ever called by the engine (`crate::engine`), which looks them up,
//! runs the checks that come before any command, and builds the `Ctx`: nothing else
//! builds one. A handler's `Action` tells the engine what must happen beyond the reply.

mod acl;
mod bitfield;
mod bitmaps;
pub mod blocking;
mod client_admin;
mod command_info;
mod command_list;
mod connection;
mod debug;
mod diagnostics;
mod dump;
pub mod failover;
mod functions;
mod geo;
mod getkeys;
mod hashes;
mod hyperloglog;
mod info;
mod keys;
mod lcs;
mod lists;
mod lolwut;
mod memory;
mod migrate;
mod object;
mod picks;
mod pubsub;
mod replication;
mod scripting;
mod server;
mod sets;
mod sort;
mod standalone;
mod state;
mod stream_groups;
mod stream_info;
mod streams;
mod strings;
pub mod transactions;
mod zsets;

use crate::effects::Effects;
use crate::keyspace::{Db, Entry, Keyspace, Liveness, Location, Value};
pub use crate::notify::EventClass;
use crate::resp::ReplyWriter;
use bytes::Bytes;
pub use client_admin::{
    ClientModes, KillCandidate, KillFilter, ReplyMode, TypeFilter, UnblockReply, Victims,
};
pub use debug::{Reload, ReloadCommand};
use std::sync::Arc;

pub use state::{
    AfterFlushAll, DiskError, LoadProgress, LoadingStatus, PersistenceInfo, ReplyShows,
    ServerState, SessionState,
};

pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const FAST: u32 = 1 << 4;
    /// Allowed before AUTH (AUTH, HELLO, QUIT).
    pub const NO_AUTH: u32 = 1 << 5;
    /// Allowed while the dataset is loading.
    pub const LOADING: u32 = 1 << 6;
    pub const STALE: u32 = 1 << 7;
    /// The key positions in the table are not the whole story (LMPOP, ZUNION…): COMMAND
    /// reports `movablekeys`.
    pub const MOVABLEKEYS: u32 = 1 << 8;
    /// Not allowed inside MULTI (SHUTDOWN, WATCH…): queuing it fails the transaction.
    pub const NO_MULTI: u32 = 1 << 9;
    /// May block the client (BLPOP…).
    pub const BLOCKING: u32 = 1 << 10;
    /// Not allowed from scripts (`redis.call`): MULTI, EVAL, blocking pops…
    pub const NO_SCRIPT: u32 = 1 << 11;
    /// A pub/sub command (COMMAND INFO's `pubsub`).
    pub const PUBSUB: u32 = 1 << 12;

    /// In Redis's order (COMMAND INFO lists them so).
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NO_SCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MULTI, "no_multi"),
        (MOVABLEKEYS, "movablekeys"),
    ];
}

pub type Args<'a> = [&'a [u8]];

/// What must happen after a handler's reply, beyond sending it. The engine acts on the
/// first two itself and hands the others to the event loop (`engine::Outcome`).
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// EXEC may run: the engine runs these queued commands now, as one unit.
    Exec(Vec<Vec<Vec<u8>>>),
    /// CLIENT LIST / CLIENT INFO need every session: the engine asks whoever holds them
    /// to write the reply. `ids`: only these clients (CLIENT LIST ID ...).
    ClientList {
        only_self: bool,
        ids: Option<Vec<u64>>,
        kind: Option<ClientKind>,
    },
    /// Send the reply, then close (QUIT).
    Close,
    /// SHUTDOWN (no reply unless it fails), or SHUTDOWN ABORT (its reply written).
    Shutdown(crate::shutdown::ShutdownCall),
    /// BGREWRITEAOF / BGSAVE: start the job now (the reply is written).
    StartJob(Job),
    /// A blocking command found nothing: park the client (no reply written).
    Block(blocking::Blocked),
    /// EVAL and its kin: the engine runs the script now (`crate::scripting::run`).
    RunScript(Box<crate::scripting::run::ScriptCall>),
    /// DEBUG RELOAD / LOADAOF: the event loop persists and loads the dataset, then writes
    /// the reply (nothing is written yet).
    Reload(Reload),
    /// PSYNC / SYNC: the session is a replica now; the event loop attaches its socket to
    /// the stream.
    Replicate(crate::replication::master::Attach),
}

/// The classes of client Tessera has (CLIENT LIST TYPE; Redis's `getClientType`): a
/// replica (PSYNC or SYNC made it one) is `replica`, a client with a subscription is
/// `pubsub`; the output limit is the class's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    Normal,
    PubSub,
    Replica,
    /// The link to this instance's master.
    Master,
}

impl ClientKind {
    pub fn of(session: &SessionState) -> ClientKind {
        if session.replica {
            ClientKind::Replica
        } else if session.master_link {
            ClientKind::Master
        } else if session.subscriptions.any() {
            ClientKind::PubSub
        } else {
            ClientKind::Normal
        }
    }

    /// Its `client-output-buffer-limit` class.
    pub fn output_limit(
        self,
        limits: &crate::config::OutputBufferLimits,
    ) -> crate::config::OutputBufferLimit {
        match self {
            // Redis limits its master's link as a normal client.
            ClientKind::Normal | ClientKind::Master => limits.normal,
            ClientKind::PubSub => limits.pubsub,
            ClientKind::Replica => limits.replica,
        }
    }
}

/// Whether SHUTDOWN writes `dbfilename` first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownSave {
    /// No SAVE or NOSAVE given (a termination signal too).
    AsConfigured,
    /// SHUTDOWN SAVE.
    Save,
    /// SHUTDOWN NOSAVE.
    NoSave,
}

/// A background job a command asks to start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// BGREWRITEAOF: a compaction of the log.
    Rewrite,
    /// BGSAVE: a snapshot to `dbfilename`.
    BackgroundSave,
    /// After FLUSHALL: a running BGSAVE stopped, and with `dbfilename` as the dataset the
    /// empty dataset saved now (`PersistenceInfo::after_flushall`).
    SaveAfterFlush,
}

#[derive(Clone)]
pub struct CommandSpec {
    pub name: &'static str,
    /// Redis's arity: N means exactly N words (name included), -N means at least N.
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub key_step: i32,
    pub group: &'static str,
    pub summary: &'static str,
    pub handler: fn(&mut Ctx, &Args) -> Action,
}

impl CommandSpec {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

pub struct Ctx<'a> {
    pub keyspace: &'a mut Keyspace,
    pub client: &'a mut SessionState,
    pub server: &'a mut ServerState,
    pub out: ReplyWriter<'a>,
    /// Where the command's writes are recorded (`Ctx::propagate`).
    pub effects: &'a mut Effects,
    /// The command's clock: one reading per command, as Redis's `commandTimeSnapshot`.
    pub now_ms: i64,
    /// Replaying the log, or a replica running its master's commands: nothing expires
    /// (and, replaying, nothing is logged).
    pub loading: bool,
    /// A client of a replica: an expired key reads as gone but stays (its master deletes
    /// it, with a DEL in its stream).
    pub keep_expired: bool,
    /// Whether a blocking command may block now (not inside EXEC), or is being served.
    pub block_mode: blocking::BlockMode,
    /// A script's `redis.call` runs the command (Redis's CLIENT_SCRIPT): SORT then orders
    /// a set it would otherwise return in the table's order.
    pub in_script: bool,
    /// Arguments that arrived as big bulks, read into strings of their own: (position,
    /// value). A command that stores an argument whole takes it through `value_arg`.
    pub big_arguments: &'a [(usize, crate::types::string::Str)],
    /// Whoever holds the other sessions: pub/sub messages for them go through it.
    pub host: &'a mut dyn crate::engine::Host,
    /// The command is a write: `lookup_read` and `read` are then Redis's write lookups,
    /// which count no keyspace hit or miss and raise no `keymiss` (`reading` lifts it
    /// where Redis reads inside a write).
    pub write_lookups: bool,
    /// The client whose request is running, where tracking's messages for it wait until
    /// its reply is written (`crate::tracking::Origin`); None during replay.
    pub origin: Option<&'a mut crate::tracking::Origin>,
    /// The keys this command has accessed (database, and the argument's address and
    /// length): a key looked up again by the same command (a read, then the write) is one
    /// access for LRU and LFU, as Redis's handlers mostly look a key up once.
    pub accessed: smallvec::SmallVec<[(usize, usize, usize); 4]>,
}

impl<'a> Ctx<'a> {
    /// Whether looking `key` up now is an access (`crate::access`): the first lookup of
    /// that argument in this command.
    fn first_access(&mut self, key: &[u8]) -> bool {
        let id = (self.client.db, key.as_ptr() as usize, key.len());
        if self.accessed.contains(&id) {
            return false;
        }
        self.accessed.push(id);
        true
    }

    /// Whether `key` is in the session's database, after expiring it if due, and with its
    /// access field updated if `touch` and this is the command's first access to it: one
    /// probe of the table (a lookup is the hottest path there is).
    fn find_live(&mut self, key: &[u8], touch: bool) -> Option<Location> {
        let touch = touch && self.first_access(key);
        self.find_live_touching(key, touch)
    }

    /// `find_live`, with the access field updated if `touch`, whatever came before.
    fn find_live_touching(&mut self, key: &[u8], touch: bool) -> Option<Location> {
        let db = self.client.db;
        let now = (!self.loading).then_some(self.now_ms);
        match self.keyspace.dbs[db].find_live(key, now, touch) {
            Liveness::Live(location) => Some(location),
            Liveness::Absent => None,
            Liveness::Expired => {
                if !self.keep_expired {
                    self.expire_now(db, key);
                }
                None
            }
        }
    }

    /// The live entry `find_live` found at `location` (the borrow checker does not let it
    /// return it; the second probe hashes nothing and its bucket is in the cache).
    fn found(&self, key: &[u8], location: Location) -> &Entry {
        self.keyspace.dbs[self.client.db]
            .at(location, key)
            .expect("find_live found it")
    }

    /// Running inside EXEC (queued commands never block, background jobs are scheduled).
    pub fn in_exec(&self) -> bool {
        !self.loading && self.block_mode == blocking::BlockMode::Never
    }

    /// Argument `index` (whose bytes are `bytes`) as a value to store: the very string it
    /// was read into when it came as a big bulk (no copy), else a copy.
    pub fn value_arg(&self, index: usize, bytes: &[u8]) -> crate::types::string::Str {
        match self.big_arguments.iter().find(|(i, _)| *i == index) {
            Some((_, value)) => {
                assert!(
                    std::ptr::eq(value.as_ptr(), bytes.as_ptr()),
                    "value_arg({index}) given another argument's bytes"
                );
                value.clone()
            }
            None => crate::types::string::Str::from(bytes),
        }
    }

    /// Publishes `payload` on `channel` (a shard channel when `shard`) and returns the
    /// number of receivers. The running session's own copies go into its reply at once,
    /// before the command's reply (as in Redis); the others through the host.
    pub fn publish(&mut self, channel: &[u8], payload: &[u8], shard: bool) -> usize {
        let me = self.client.id;
        let out = &mut self.out;
        let host = &mut *self.host;
        self.server
            .pubsub
            .publish(channel, payload, shard, &mut |id, message| {
                route(me, out, host, id, message)
            })
    }

    /// Raises keyspace event `event` of `class` on `key` in the session's database
    /// (Redis's `notifyKeyspaceEvent`): published if `notify-keyspace-events` says so,
    /// through the path PUBLISH takes. Handlers call it where the change happens, with
    /// Redis's event name for the command.
    pub fn notify(&mut self, class: EventClass, event: &str, key: &[u8]) {
        let db = self.client.db;
        self.notify_in(db, class, event, key);
    }

    /// `notify` for a key of database `db` (MOVE's and COPY's target).
    pub fn notify_in(&mut self, db: usize, class: EventClass, event: &str, key: &[u8]) {
        let me = self.client.id;
        let out = &mut self.out;
        let host = &mut *self.host;
        crate::notify::keyspace_event(
            self.server.config.notify_keyspace_events,
            &self.server.pubsub,
            class,
            event,
            key,
            db,
            &mut |id, message| route(me, out, host, id, message),
        );
    }

    /// Runs `lookups` as Redis's read lookups inside a write command (they count hits and
    /// misses and raise `keymiss`): GETSET, GETDEL, GETEX and SET GET read their key so,
    /// COPY its source, the *STORE commands their sources.
    pub fn reading<R>(&mut self, lookups: impl FnOnce(&mut Self) -> R) -> R {
        let write_lookups = std::mem::replace(&mut self.write_lookups, false);
        let result = lookups(self);
        self.write_lookups = write_lookups;
        result
    }

    /// Counts a read lookup's hit or miss (a miss raises `keymiss`), unless the command's
    /// lookups are write lookups.
    fn count_lookup(&mut self, key: &[u8], found: bool) {
        if self.write_lookups {
            return;
        }
        if found {
            self.server.stats.keyspace_hits += 1;
        } else {
            self.server.stats.keyspace_misses += 1;
            self.notify(EventClass::KeyMiss, "keymiss", key);
        }
    }

    pub fn db(&mut self) -> &mut Db {
        &mut self.keyspace.dbs[self.client.db]
    }

    /// Logs a write in its deterministic form and counts it as a change; the keys the
    /// record changes are touched for WATCH.
    pub fn propagate(&mut self, args: &[&[u8]]) {
        self.server.dirty += 1;
        let db = self.client.db;
        self.effects.record(db, args);
        if !self.server.watches.is_empty()
            || !self.server.blocked.is_empty()
            || self.server.tracking.watches_changes()
        {
            self.touch_keys_of(args);
        }
    }

    /// Logs a write that Redis changes without `signalModifiedKey`: WATCH is not
    /// touched, tracking clients are not told and blocked clients are not woken (the
    /// consumer-group commands, whose changes Redis reports to none of them).
    pub fn propagate_unsignalled(&mut self, args: &[&[u8]]) {
        self.server.dirty += 1;
        let db = self.client.db;
        self.effects.record(db, args);
    }

    /// Wakes clients blocked on `key` without touching WATCH or tracking (Redis's
    /// `signalKeyAsReady` alone).
    pub fn signal_ready(&mut self, key: &[u8]) {
        let db = self.client.db;
        self.server.blocked.signal(db, key);
    }

    /// Touches the keys a logged record changes (for WATCH, to wake clients blocked on
    /// them, and to invalidate them in tracking clients' caches): from the command
    /// table's key positions,
    /// but for the commands whose table positions say more (a *STORE's sources) or less
    /// (MOVE's and COPY's other database).
    fn touch_keys_of(&mut self, args: &[&[u8]]) {
        let db = self.client.db;
        let Some(spec) = global_registry().get(args[0]) else {
            return;
        };
        let mut touched: Vec<(usize, &[u8])> = Vec::new();
        match spec.name {
            "move" => {
                if let Some(target) = args.get(2).and_then(|a| crate::resp::parse_i64(a)) {
                    touched.push((target as usize, args[1]));
                }
                touched.push((db, args[1]));
            }
            "copy" => {
                let mut target = db;
                for pair in args[3..].windows(2) {
                    if eq_ignore_case(pair[0], "db")
                        && let Some(n) = crate::resp::parse_i64(pair[1])
                    {
                        target = n as usize;
                    }
                }
                touched.push((target, args[2]));
            }
            name if name.ends_with("store") && args.len() > 1 => touched.push((db, args[1])),
            // BITOP's table positions name its sources too; only the destination changes.
            "bitop" if args.len() > 2 => touched.push((db, args[2])),
            _ => {
                for index in key_positions(spec, args.len()) {
                    touched.push((db, args[index]));
                }
            }
        }
        for (db, key) in touched {
            self.touch_key(db, key);
        }
    }

    /// Sends a record to the replicas only (PUBLISH, so that their subscribers hear it,
    /// as Redis does): not logged, and no change of the dataset. Nothing without replicas.
    pub fn propagate_to_replicas(&mut self, args: &[&[u8]]) {
        if self.server.replication.stream_active() {
            self.effects.record_for_replicas(self.client.db, args);
        }
    }

    /// Redis's `signalModifiedKey` for a change that is not logged (an LTRIM that removed
    /// nothing): WATCH is touched and tracking clients told, as for any write.
    pub fn signal_modified(&mut self, key: &[u8]) {
        if !self.server.watches.is_empty()
            || !self.server.blocked.is_empty()
            || self.server.tracking.watches_changes()
        {
            self.touch_key(self.client.db, key);
        }
    }

    fn touch_key(&mut self, db: usize, key: &[u8]) {
        if db < self.keyspace.dbs.len() {
            let exists = self.keyspace.dbs[db].get(key).is_some();
            self.server.watches.touch(db, key, exists);
            // A deleted key is signalled too: a client blocked in XREADGROUP on it is
            // told so (Redis's `signalDeletedKeyAsReady`); other waiters find nothing and
            // stay blocked.
            self.server.blocked.signal(db, key);
            let changed_by = self.client.id;
            self.invalidate_tracked(key, Some(changed_by));
        }
    }

    /// Tells tracking clients that `key` changed (Redis's `trackingInvalidateKey`).
    /// `changed_by`: the session whose command changed it (a script's own session inside
    /// a script, as Redis's script client), None for an expiry.
    fn invalidate_tracked(&mut self, key: &[u8], changed_by: Option<u64>) {
        if !self.server.tracking.watches_changes() {
            return;
        }
        let running = self.origin.as_ref().map(|origin| origin.id);
        let mut origin = self.origin.as_deref_mut();
        let host = &mut *self.host;
        self.server
            .tracking
            .key_changed(key, changed_by, running, &mut |id, message| {
                crate::tracking::Origin::route(origin.as_deref_mut(), host, id, message)
            });
    }

    /// FLUSHDB / FLUSHALL, once per command: every tracking client is told that all its
    /// cached keys are invalid, and the key table is emptied (SWAPDB tells nobody, as in
    /// Redis 7.0).
    pub fn invalidate_all_tracked(&mut self) {
        // Even with nobody tracking now, the keys remembered are forgotten.
        let mut origin = self.origin.as_deref_mut();
        let host = &mut *self.host;
        self.server.tracking.flushed(&mut |id, message| {
            crate::tracking::Origin::route(origin.as_deref_mut(), host, id, message)
        });
    }

    /// Before FLUSHDB / FLUSHALL empties `db`, or SWAPDB exchanges it with `other`: WATCH
    /// is touched and the keys clients wait on in `db` are looked at again after the
    /// command (a list swapped in serves its BLPOP; an XREADGROUP whose stream went is
    /// told so).
    pub fn touch_db(&mut self, db: usize, other: Option<usize>) {
        self.server
            .watches
            .touch_db(self.keyspace, db, other, self.now_ms);
        self.server.blocked.signal_db(db);
    }

    /// The reply size past which a loop writing as many elements as the client asked for
    /// (random picks with a negative count) stops: the client's hard output limit, as
    /// Redis's loops stop once the client is to be closed (`CLIENT_CLOSE_ASAP`); the end of
    /// the turn then closes it. None without a limit, and in a script, whose reply goes to
    /// Lua (Redis's script client has no limit either).
    pub fn reply_limit(&self) -> Option<usize> {
        if self.in_script {
            return None;
        }
        let limits = &self.server.config.output_buffer_limits;
        let hard = ClientKind::of(self.client).output_limit(limits).hard_bytes;
        (hard != 0).then(|| usize::try_from(hard).unwrap_or(usize::MAX))
    }

    /// Removes `key` if it has expired (logging a DEL, as Redis does). Returns true if removed.
    pub fn expire_if_needed(&mut self, key: &[u8]) -> bool {
        let db_index = self.client.db;
        self.expire_if_needed_in(db_index, key)
    }

    pub fn expire_if_needed_in(&mut self, db_index: usize, key: &[u8]) -> bool {
        if self.loading || self.keep_expired {
            return false;
        }
        let now = Some(self.now_ms);
        let expired = self.keyspace.dbs[db_index].find_live(key, now, false) == Liveness::Expired;
        if expired {
            self.expire_now(db_index, key);
        }
        expired
    }

    /// Deletes `key`, found expired, as Redis's `deleteExpiredKeyAndPropagate` does.
    fn expire_now(&mut self, db_index: usize, key: &[u8]) {
        self.keyspace.dbs[db_index].remove(key);
        self.server.stats.expired_keys += 1;
        self.server.dirty += 1;
        self.notify_in(db_index, EventClass::Expired, "expired", key);
        self.effects.record(db_index, &[b"DEL", key]);
        self.server.watches.touch(db_index, key, false);
        // A client blocked in XREADGROUP on it is told (Redis's `signalDeletedKeyAsReady`).
        self.server.blocked.signal(db_index, key);
        self.invalidate_tracked(key, None);
    }

    /// A key lookup for a command: expires the key first if due, and counts as an access
    /// (`crate::access`), as every lookup but `lookup_read_no_touch`.
    pub fn lookup(&mut self, key: &[u8]) -> Option<&Entry> {
        let location = self.find_live(key, true)?;
        Some(self.found(key, location))
    }

    /// A read lookup: counts a keyspace hit or miss and raises `keymiss` on a miss (not
    /// in a write command: see `write_lookups`).
    pub fn lookup_read(&mut self, key: &[u8]) -> Option<&Entry> {
        let found = self.find_live(key, true);
        self.count_lookup(key, found.is_some());
        Some(self.found(key, found?))
    }

    /// `lookup_read` of a key the command built rather than was given (SORT's BY and GET
    /// patterns): every lookup is an access, as each of Redis's is, even of a key looked
    /// up before by the same command (and `accessed`, which remembers arguments, stays
    /// small however many keys a pattern names).
    pub fn lookup_read_built(&mut self, key: &[u8]) -> Option<&Entry> {
        let found = self.find_live_touching(key, true);
        self.count_lookup(key, found.is_some());
        Some(self.found(key, found?))
    }

    /// `lookup_read` that is no access for eviction (Redis's LOOKUP_NOTOUCH: EXISTS,
    /// TYPE, TTL and its kin).
    pub fn lookup_read_no_touch(&mut self, key: &[u8]) -> Option<&Entry> {
        let found = self.find_live(key, false);
        self.count_lookup(key, found.is_some());
        Some(self.found(key, found?))
    }

    /// The string at `key`: Ok(None) if absent, Err after replying WRONGTYPE.
    pub fn get_string(&mut self, key: &[u8]) -> Result<Option<crate::types::Str>, AlreadyReplied> {
        match self.lookup_read(key).map(|e| &e.value) {
            None => Ok(None),
            Some(Value::String(s, _)) => Ok(Some(s.clone())),
            Some(_) => {
                self.wrong_type();
                Err(AlreadyReplied)
            }
        }
    }

    pub fn wrong_type(&mut self) {
        self.out.error(WRONGTYPE);
    }

    /// The collection of type `T` at `key`, for reading: Ok(None) if absent, Err after
    /// replying WRONGTYPE. A read lookup, as `lookup_read`.
    pub fn read<T: Collection>(&mut self, key: &[u8]) -> Result<Option<&T>, AlreadyReplied> {
        let found = self.find_live(key, true);
        self.count_lookup(key, found.is_some());
        let Some(location) = found else {
            return Ok(None);
        };
        if T::of(&self.found(key, location).value).is_none() {
            self.wrong_type();
            return Err(AlreadyReplied);
        }
        // A second probe of an entry just looked at (cache-warm): the borrow checker does
        // not let the first be returned on one branch and `self` be used on the other.
        Ok(T::of(&self.found(key, location).value).map(|c| &**c))
    }

    /// Checks that `key` is absent or holds a `T`, replying WRONGTYPE otherwise. For
    /// commands that check every key before changing any (Redis's order of errors).
    pub fn check_type<T: Collection>(&mut self, key: &[u8]) -> Result<bool, AlreadyReplied> {
        self.expire_if_needed(key);
        // No access: the check is always followed by the lookup that reads or writes.
        match self.keyspace.dbs[self.client.db].get(key) {
            None => Ok(false),
            Some(e) if T::of(&e.value).is_some() => Ok(true),
            Some(_) => {
                self.wrong_type();
                Err(AlreadyReplied)
            }
        }
    }

    /// The collection of type `T` at `key`, for changing in place: Ok(None) if absent, Err
    /// after replying WRONGTYPE. If a snapshot's capture still shares it, a big one is
    /// serialised into the capture first (`Db::release_captured`), others are copied.
    pub fn write<T: Collection>(&mut self, key: &[u8]) -> Result<Option<&mut T>, AlreadyReplied> {
        self.write_value(key, true)
    }

    /// `write`; `touch`: the lookup is an access (not for a key just created).
    fn write_value<T: Collection>(
        &mut self,
        key: &[u8],
        touch: bool,
    ) -> Result<Option<&mut T>, AlreadyReplied> {
        self.expire_if_needed(key);
        let db = self.client.db;
        let (is_type, is_deep) = match self.keyspace.dbs[db].get(key) {
            None => return Ok(None),
            Some(e) => (T::of(&e.value).is_some(), e.value.is_deep()),
        };
        if !is_type {
            self.wrong_type();
            return Err(AlreadyReplied);
        }
        // `get_mut` captures the slot if a snapshot still needs it: only then can the
        // value be shared with a capture.
        let captured_shares_it = |db: &mut crate::keyspace::Db| {
            db.get_mut(key)
                .is_some_and(|entry| entry.value.is_deep_and_shared())
        };
        if is_deep && captured_shares_it(&mut self.keyspace.dbs[db]) {
            if self.keyspace.dbs[db].release_captured(key) {
                self.server.stats.capture_serialised_values += 1;
            } else {
                self.server.stats.capture_copied_values += 1;
            }
        }
        // A value still shared (with a capture, most often: `get_mut` has captured the
        // slot by now) is copied by `make_mut` below: the old one is let go of.
        let shared = self.keyspace.dbs[db]
            .get_mut(key)
            .and_then(|entry| entry.value.is_shared().then(|| entry.value.clone()));
        if let Some(value) = shared {
            self.keyspace.dbs[db].let_go(crate::keyspace::key_slot(key), &value);
        }
        let touch = touch && self.first_access(key);
        let entry = self.keyspace.dbs[db].get_mut(key).expect("found above");
        if touch {
            entry.value.access_mut().touch();
        }
        Ok(Some(Arc::make_mut(
            T::of_mut(&mut entry.value).expect("checked above"),
        )))
    }

    /// Like `write`, but creates an empty `T` at `key` when absent (raising `new`, as
    /// Redis's `dbAdd`). The caller must leave it non-empty (or call `remove_if_empty`):
    /// Redis never keeps an empty collection.
    pub fn write_or_create<T: Collection + Default>(
        &mut self,
        key: &[u8],
    ) -> Result<&mut T, AlreadyReplied> {
        if self.write::<T>(key)?.is_none() {
            self.keyspace.dbs[self.client.db].insert(Entry {
                key: crate::keyspace::Key::from(key),
                value: T::into_value(Arc::new(T::default())),
                expire_at_ms: crate::keyspace::NO_EXPIRY,
            });
            self.notify(EventClass::New, "new", key);
        }
        // One access at most: the lookup above made it, or the key is new.
        Ok(self.write_value::<T>(key, false)?.expect("just created"))
    }

    /// Deletes `key` if it holds an empty collection (after a pop or a removal); returns
    /// true if it did. The command's own log record covers the deletion on replay.
    pub fn remove_if_empty(&mut self, key: &[u8]) -> bool {
        let db = &mut self.keyspace.dbs[self.client.db];
        let empty = db.get(key).is_some_and(|e| e.value.is_empty_collection());
        if empty {
            db.remove(key);
        }
        empty
    }
}

/// Where a pub/sub message for client `id` goes: the running session's (`me`) own into
/// its reply, another's through the host.
fn route(
    me: u64,
    out: &mut ReplyWriter,
    host: &mut dyn crate::engine::Host,
    id: u64,
    message: &crate::pubsub::Message,
) {
    if id == me {
        message.write(out);
    } else {
        host.deliver(id, message);
    }
}

/// A collection type as stored in a `Value` (for `Ctx::read`, `write` and friends).
pub trait Collection: Clone {
    fn of(value: &Value) -> Option<&Arc<Self>>;
    fn of_mut(value: &mut Value) -> Option<&mut Arc<Self>>;
    fn into_value(this: Arc<Self>) -> Value;
}

macro_rules! collection {
    ($type:ty, $variant:ident) => {
        impl Collection for $type {
            fn of(value: &Value) -> Option<&Arc<Self>> {
                match value {
                    Value::$variant(c, _) => Some(c),
                    _ => None,
                }
            }
            fn of_mut(value: &mut Value) -> Option<&mut Arc<Self>> {
                match value {
                    Value::$variant(c, _) => Some(c),
                    _ => None,
                }
            }
            fn into_value(this: Arc<Self>) -> Value {
                Value::$variant(this, crate::access::Access::new())
            }
        }
    };
}
collection!(crate::types::List, List);
collection!(crate::types::Hash, Hash);
collection!(crate::types::Set, Set);
collection!(crate::types::ZSet, ZSet);
collection!(crate::types::Stream, Stream);

/// A (database, key) looked up in a map keyed by `(usize, Bytes)` without copying the
/// key: it hashes as the tuple does (`Bytes` hashes as its bytes).
#[derive(Hash)]
pub(crate) struct DbKey<'a>(pub usize, pub &'a [u8]);

impl hashbrown::Equivalent<(usize, Bytes)> for DbKey<'_> {
    fn equivalent(&self, key: &(usize, Bytes)) -> bool {
        self.0 == key.0 && self.1 == key.1.as_ref()
    }
}

/// The command's error reply has been written; the handler only has to return.
#[derive(Debug)]
pub struct AlreadyReplied;

pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const SYNTAX_ERROR: &str = "ERR syntax error";
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

/// Parses an integer argument or replies with Redis's error.
pub fn int_arg(ctx: &mut Ctx, arg: &[u8]) -> Option<i64> {
    let parsed = crate::resp::parse_i64(arg);
    if parsed.is_none() {
        ctx.out.error(NOT_INTEGER);
    }
    parsed
}

/// The optional count of LPOP / RPOP / SPOP / ZPOPMIN / ZPOPMAX: Ok(None) when absent,
/// Err after Redis's error for anything but a non-negative integer.
pub fn optional_count(ctx: &mut Ctx, arg: Option<&&[u8]>) -> Result<Option<usize>, AlreadyReplied> {
    match arg {
        None => Ok(None),
        Some(arg) => match crate::resp::parse_i64(arg) {
            Some(n) if n >= 0 => Ok(Some(n as usize)),
            _ => {
                ctx.out.error("ERR value is out of range, must be positive");
                Err(AlreadyReplied)
            }
        },
    }
}

pub fn eq_ignore_case(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

pub fn lossy(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// Every command Tessera knows, grouped by module.
pub fn table() -> Vec<CommandSpec> {
    let mut all = Vec::new();
    all.extend(connection::commands());
    all.extend(strings::commands());
    all.extend(bitmaps::commands());
    all.extend(bitfield::commands());
    all.extend(lcs::commands());
    all.extend(keys::commands());
    all.extend(server::commands());
    all.extend(lists::commands());
    all.extend(hashes::commands());
    all.extend(sets::commands());
    all.extend(sort::commands());
    all.extend(zsets::commands());
    all.extend(hyperloglog::commands());
    all.extend(geo::commands());
    all.extend(streams::commands());
    all.extend(stream_groups::commands());
    all.extend(stream_info::commands());
    all.extend(transactions::commands());
    all.extend(object::commands());
    all.extend(blocking::commands());
    all.extend(pubsub::commands());
    all.extend(scripting::commands());
    all.extend(functions::commands());
    all.extend(acl::commands());
    all.extend(standalone::commands());
    all.extend(diagnostics::commands());
    all.extend(dump::commands());
    all.extend(migrate::commands());
    all.extend(memory::commands());
    all.extend(lolwut::commands());
    all.extend(debug::commands());
    all.extend(replication::commands());
    all.extend(failover::commands());
    all
}

/// The command table, built once per process (for lookups outside the event loop's own
/// copy: COMMAND, WATCH's key positions).
pub fn global_registry() -> &'static Registry {
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(Registry::new)
}

/// The argument indexes of the keys a read-only command reads, for client-side caching:
/// the table's positions, or, for the commands whose keys follow a count (ZUNION,
/// SINTERCARD…, Redis's movable keys), the keys that count announces.
pub fn tracked_key_positions(spec: &CommandSpec, argv: &[&[u8]]) -> Vec<usize> {
    if !spec.has(flags::MOVABLEKEYS) {
        return key_positions(spec, argv.len()).collect();
    }
    let counted_at = match spec.name {
        // SORT_RO's only key is its source (Redis's `sortROGetKeys`): its BY and GET keys
        // come from the data.
        "sort_ro" => return vec![1],
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" => 1,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => 2,
        "xread" | "xreadgroup" => return streams::xread_key_positions(argv),
        _ => return Vec::new(),
    };
    let count = argv
        .get(counted_at)
        .and_then(|arg| crate::resp::parse_i64(arg))
        .filter(|&count| count > 0)
        .map_or(0, |count| count as usize);
    let first = counted_at + 1;
    (first..first.saturating_add(count).min(argv.len())).collect()
}

/// The argument indexes a command's table row says are keys, for `argc` arguments.
pub fn key_positions(spec: &CommandSpec, argc: usize) -> impl Iterator<Item = usize> {
    let argc = argc as i32;
    let first = spec.first_key;
    let last = if spec.last_key < 0 {
        argc + spec.last_key
    } else {
        spec.last_key.min(argc - 1)
    };
    let step = spec.key_step.max(1);
    (first..=last)
        .step_by(step as usize)
        .filter(move |_| first > 0)
        .map(|i| i as usize)
}

pub struct Registry {
    /// Each command with its id in Redis's command table (`crate::acl::table`), which
    /// indexes its statistics (`crate::command_stats`).
    by_name: hashbrown::HashMap<Vec<u8>, Registered>,
}

struct Registered {
    spec: CommandSpec,
    id: Option<usize>,
    /// A container's subcommands that write where its own row does not say so (XGROUP
    /// CREATE, FUNCTION LOAD…), by lowercase name: the container's row with the
    /// subcommand's `write` and `denyoom` added, so that every check made on a spec
    /// (read-only replica, MISCONF, `-OOM`, CLIENT PAUSE WRITE, read-only scripts, a
    /// transaction's writes) sees the subcommand as Redis's table flags it.
    writing_subcommands: Vec<(String, CommandSpec)>,
}

/// The subcommands of `id`'s row that add `write` or `denyoom` to `container`'s flags.
fn writing_subcommands(container: &CommandSpec, id: usize) -> Vec<(String, CommandSpec)> {
    let table = crate::acl::table::table();
    let mut found = Vec::new();
    for &sub in &table.commands[id].subcommands {
        let sub = &table.commands[sub];
        let added = flags::NAMES
            .iter()
            .filter(|(bit, name)| {
                bit & (flags::WRITE | flags::DENYOOM) != 0 && sub.flags.iter().any(|f| f == name)
            })
            .fold(0, |bits, (bit, _)| bits | bit)
            & !container.flags;
        if added == 0 {
            continue;
        }
        let name = sub.full_name.split_once('|').map_or("", |(_, name)| name);
        let derived = CommandSpec {
            flags: container.flags | added,
            ..container.clone()
        };
        found.push((name.to_string(), derived));
    }
    found
}

impl Registry {
    pub fn new() -> Registry {
        let mut by_name = hashbrown::HashMap::new();
        let acl_table = crate::acl::table::table();
        for spec in table() {
            let id = acl_table
                .lookup(spec.name.as_bytes())
                .map(|command| command.id);
            let writing_subcommands = id.map_or_else(Vec::new, |id| writing_subcommands(&spec, id));
            let registered = Registered {
                spec,
                id,
                writing_subcommands,
            };
            let previous = by_name.insert(registered.spec.name.as_bytes().to_vec(), registered);
            assert!(previous.is_none(), "command registered twice");
        }
        Registry { by_name }
    }

    /// The command a request runs, as the checks before it must see it: for a
    /// subcommand that writes where its container's row does not say so, the container's
    /// row with the subcommand's flags (`Registered::writing_subcommands`); otherwise
    /// `get_with_id`'s.
    pub fn resolve(&self, argv: &[&[u8]]) -> Option<(&CommandSpec, Option<usize>)> {
        let registered = self.registered(argv.first()?)?;
        let derived = argv.get(1).and_then(|sub| {
            registered
                .writing_subcommands
                .iter()
                .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(sub))
        });
        let spec = derived.map_or(&registered.spec, |(_, spec)| spec);
        Some((spec, registered.id))
    }

    /// Case-insensitive lookup without allocating for ordinary command names.
    pub fn get(&self, name: &[u8]) -> Option<&CommandSpec> {
        self.get_with_id(name).map(|(spec, _)| spec)
    }

    /// The command and its id in Redis's table (None for a command Redis lacks).
    pub fn get_with_id(&self, name: &[u8]) -> Option<(&CommandSpec, Option<usize>)> {
        self.registered(name).map(|r| (&r.spec, r.id))
    }

    fn registered(&self, name: &[u8]) -> Option<&Registered> {
        let mut lower = [0u8; 32];
        if name.len() > lower.len() {
            return None;
        }
        for (dst, src) in lower.iter_mut().zip(name) {
            *dst = src.to_ascii_lowercase();
        }
        self.by_name.get(&lower[..name.len()])
    }

    pub fn iter(&self) -> impl Iterator<Item = &CommandSpec> {
        self.by_name.values().map(|r| &r.spec)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

/// Redis's reply to an unknown command.
pub fn unknown_command_error(args: &Args) -> String {
    let mut listed = String::new();
    for arg in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let text = lossy(arg);
        let shown: String = text.chars().take(room).collect();
        listed.push_str(&format!("'{shown}' "));
    }
    let name: String = lossy(args[0]).chars().take(128).collect();
    format!("ERR unknown command '{name}', with args beginning with: {listed}")
}

pub fn unknown_subcommand(ctx: &mut Ctx, container: &str, sub: &[u8]) {
    let sub: String = lossy(sub).chars().take(128).collect();
    ctx.out.error(&format!(
        "ERR unknown subcommand '{sub}'. Try {} HELP.",
        container.to_ascii_uppercase()
    ));
}

/// Redis's `addReplySubcommandSyntaxError`: the subcommand as given (up to a NUL, at most
/// 128 bytes) and the command's name as given, upper-cased.
pub fn subcommand_syntax_error(ctx: &mut Ctx, args: &Args) {
    use stream_groups::c_text;
    ctx.out.error(&format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        c_text(&args[1][..args[1].len().min(128)]),
        c_text(args[0]).to_ascii_uppercase()
    ));
}

pub fn wrong_arity(ctx: &mut Ctx, full_name: &str) {
    ctx.out.error(&format!(
        "ERR wrong number of arguments for '{full_name}' command"
    ));
}

/// Defines a table row compactly: `command!(name, arity, flags, (first, last, step), group, summary, handler)`.
#[macro_export]
macro_rules! command {
    ($name:literal, $arity:expr, $flags:expr, ($first:expr, $last:expr, $step:expr), $group:literal, $summary:literal, $handler:expr) => {
        $crate::commands::CommandSpec {
            name: $name,
            arity: $arity,
            flags: $flags,
            first_key: $first,
            last_key: $last,
            key_step: $step,
            group: $group,
            summary: $summary,
            handler: $handler,
        }
    };
}

/// Parses an expiry given in `unit_ms` units (1 or 1000), absolute or relative to `now`,
/// into absolute milliseconds; None on overflow or a non-positive value (Redis's
/// "invalid expire time" cases).
pub fn absolute_expiry(value: i64, unit_ms: i64, absolute: bool, now_ms: i64) -> Option<i64> {
    if value <= 0 {
        return None;
    }
    let ms = value.checked_mul(unit_ms)?;
    if absolute {
        Some(ms)
    } else {
        ms.checked_add(now_ms)
    }
}

pub fn ms_text(ms: i64) -> String {
    itoa::Buffer::new().format(ms).to_owned()
}
