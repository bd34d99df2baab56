//! The operator's CLIENT subcommands (Redis 7.0's `clientCommand`): KILL, PAUSE,
//! UNPAUSE, REPLY, NO-EVICT, UNBLOCK; and the per-session modes they set
//! (`ClientModes`), which MONITOR shares.
//!
//! Other sessions are the event loop's: a kill or an unblock asks the `Host`, which finds
//! the sessions and closes or answers them; the calling session is the engine's (it is
//! out of the host's table while it runs), so a client that kills itself is closed after
//! its reply (Redis's `CLIENT_CLOSE_AFTER_REPLY`).

use super::{Action, Args, ClientKind, Ctx, eq_ignore_case, lossy};
use crate::pause::PauseKind;

/// CLIENT REPLY: whether the session's replies are sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReplyMode {
    #[default]
    On,
    /// No replies until CLIENT REPLY ON.
    Off,
    /// CLIENT REPLY SKIP ran: the next command's reply is dropped.
    SkipNext,
    /// This command's reply is dropped.
    Skip,
}

impl ReplyMode {
    /// After a command: SKIP covers one command, the one after CLIENT REPLY SKIP (Redis's
    /// `resetClient`).
    pub fn after_command(self) -> ReplyMode {
        match self {
            ReplyMode::SkipNext => ReplyMode::Skip,
            ReplyMode::Skip => ReplyMode::On,
            mode => mode,
        }
    }
}

/// What operator commands set on a session.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientModes {
    pub reply: ReplyMode,
    /// CLIENT NO-EVICT ON (flag `e`; Tessera does not evict clients, so it is only shown).
    pub no_evict: bool,
    /// In MONITOR mode (flag `O`): never paused, and refused commands that touch keys, as
    /// Redis treats a monitor as a replica.
    pub monitor: bool,
}

/// A client type as CLIENT KILL and CLIENT LIST name it (Redis's `getClientTypeByName`).
/// Tessera has no master or replica connections: those types match nobody.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeFilter {
    Kind(ClientKind),
}

impl TypeFilter {
    pub fn parse(name: &[u8]) -> Option<TypeFilter> {
        let name = lossy(name).to_ascii_lowercase();
        Some(match name.as_str() {
            "normal" => TypeFilter::Kind(ClientKind::Normal),
            "pubsub" => TypeFilter::Kind(ClientKind::PubSub),
            "slave" | "replica" => TypeFilter::Kind(ClientKind::Replica),
            "master" => TypeFilter::Kind(ClientKind::Master),
            _ => return None,
        })
    }
}

/// CLIENT KILL's filters, ANDed. The calling session is tested by the same filter.
#[derive(Debug, Default)]
pub struct KillFilter {
    pub addr: Option<Vec<u8>>,
    pub laddr: Option<Vec<u8>>,
    pub kind: Option<TypeFilter>,
    pub id: Option<u64>,
    pub user: Option<Vec<u8>>,
}

/// What CLIENT KILL's filter tests of one session.
pub struct KillCandidate<'a> {
    pub id: u64,
    pub addr: &'a str,
    pub laddr: &'a str,
    pub kind: ClientKind,
    pub user: &'a [u8],
}

impl KillFilter {
    pub fn matches(&self, client: &KillCandidate<'_>) -> bool {
        self.addr
            .as_deref()
            .is_none_or(|a| a == client.addr.as_bytes())
            && self
                .laddr
                .as_deref()
                .is_none_or(|a| a == client.laddr.as_bytes())
            && self.kind.is_none_or(|k| k == TypeFilter::Kind(client.kind))
            && self.id.is_none_or(|id| id == client.id)
            && self.user.as_deref().is_none_or(|u| u == client.user)
    }
}

/// Who the host is to close: the sessions an ACL change dooms, or CLIENT KILL's.
pub enum Victims<'a> {
    Acl(&'a crate::acl::Doomed),
    Filter(&'a KillFilter),
}

/// CLIENT KILL ip:port | CLIENT KILL <filter> <value> ... (arity checked by the caller).
pub fn kill(ctx: &mut Ctx, args: &Args) -> Action {
    let mut filter = KillFilter::default();
    let old_form = args.len() == 3;
    let mut skip_me = !old_form; // the old form may kill the caller
    if old_form {
        filter.addr = Some(args[2].to_vec());
    } else {
        for pair in args[2..].chunks(2) {
            let [option, value] = pair else {
                ctx.out.error(super::SYNTAX_ERROR);
                return Action::None;
            };
            if eq_ignore_case(option, "id") {
                match crate::resp::parse_i64(value).filter(|&id| id >= 1) {
                    Some(id) => filter.id = Some(id as u64),
                    None => {
                        ctx.out.error("ERR client-id should be greater than 0");
                        return Action::None;
                    }
                }
            } else if eq_ignore_case(option, "type") {
                match TypeFilter::parse(value) {
                    Some(kind) => filter.kind = Some(kind),
                    None => {
                        let text = format!("ERR Unknown client type '{}'", lossy(value));
                        ctx.out.error(&text);
                        return Action::None;
                    }
                }
            } else if eq_ignore_case(option, "addr") {
                filter.addr = Some(value.to_vec());
            } else if eq_ignore_case(option, "laddr") {
                filter.laddr = Some(value.to_vec());
            } else if eq_ignore_case(option, "user") {
                if ctx.server.acl.user(value).is_none() {
                    ctx.out
                        .error(&format!("ERR No such user '{}'", lossy(value)));
                    return Action::None;
                }
                filter.user = Some(value.to_vec());
            } else if eq_ignore_case(option, "skipme") && eq_ignore_case(value, "yes") {
                skip_me = true;
            } else if eq_ignore_case(option, "skipme") && eq_ignore_case(value, "no") {
                skip_me = false;
            } else {
                ctx.out.error(super::SYNTAX_ERROR);
                return Action::None;
            }
        }
    }
    let others = ctx.host.kill_clients(&Victims::Filter(&filter));
    let close_me = !skip_me
        && ctx.host.client_addresses().is_some_and(|(addr, laddr)| {
            filter.matches(&KillCandidate {
                id: ctx.client.id,
                addr: &addr.to_string(),
                laddr: &laddr.to_string(),
                kind: ClientKind::of(ctx.client),
                user: ctx.client.user.name(),
            })
        });
    let count = others + usize::from(close_me);
    if old_form {
        if count == 0 {
            ctx.out.error("ERR No such client");
        } else {
            ctx.out.ok();
        }
    } else {
        ctx.out.integer(count as i64);
    }
    if close_me {
        Action::Close
    } else {
        Action::None
    }
}

/// CLIENT PAUSE timeout [WRITE|ALL]: the mode is checked before the timeout, as Redis does.
pub fn pause(ctx: &mut Ctx, args: &Args) -> Action {
    let kind = match args.get(3) {
        None => PauseKind::All,
        Some(mode) if eq_ignore_case(mode, "write") => PauseKind::Write,
        Some(mode) if eq_ignore_case(mode, "all") => PauseKind::All,
        Some(_) => {
            ctx.out.error("ERR CLIENT PAUSE mode must be WRITE or ALL");
            return Action::None;
        }
    };
    let Some(timeout) = crate::resp::parse_i64(args[2]) else {
        ctx.out
            .error("ERR timeout is not an integer or out of range");
        return Action::None;
    };
    if timeout < 0 {
        ctx.out.error("ERR timeout is negative");
        return Action::None;
    }
    let end_ms = if timeout > 0 {
        crate::clock::unix_ms().saturating_add(timeout)
    } else {
        0
    };
    ctx.server.pause.pause(kind, end_ms);
    ctx.out.ok();
    Action::None
}

pub fn unpause(ctx: &mut Ctx) -> Action {
    ctx.server.pause.unpause();
    ctx.out.ok();
    Action::None
}

/// CLIENT REPLY ON|OFF|SKIP: OFF and SKIP reply nothing themselves; SKIP while OFF does
/// nothing.
pub fn reply(ctx: &mut Ctx, args: &Args) -> Action {
    let modes = &mut ctx.client.modes;
    if eq_ignore_case(args[2], "on") {
        modes.reply = ReplyMode::On;
        ctx.out.ok();
    } else if eq_ignore_case(args[2], "off") {
        modes.reply = ReplyMode::Off;
    } else if eq_ignore_case(args[2], "skip") {
        if modes.reply != ReplyMode::Off {
            modes.reply = ReplyMode::SkipNext;
        }
    } else {
        ctx.out.error(super::SYNTAX_ERROR);
    }
    Action::None
}

pub fn no_evict(ctx: &mut Ctx, args: &Args) -> Action {
    if eq_ignore_case(args[2], "on") {
        ctx.client.modes.no_evict = true;
        ctx.out.ok();
    } else if eq_ignore_case(args[2], "off") {
        ctx.client.modes.no_evict = false;
        ctx.out.ok();
    } else {
        ctx.out.error(super::SYNTAX_ERROR);
    }
    Action::None
}

/// How CLIENT UNBLOCK answers the unblocked client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnblockReply {
    /// The command's timeout reply.
    Timeout,
    /// WAIT's and WAITAOF's timeout reply: the acknowledgements so far.
    WaitTimeout(crate::replication::wait::WaitReply),
    /// `-UNBLOCKED client unblocked via CLIENT UNBLOCK`.
    Error,
}

/// CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 if a client blocked on keys was unblocked.
pub fn unblock(ctx: &mut Ctx, args: &Args) -> Action {
    let how = match args.get(3) {
        None => UnblockReply::Timeout,
        Some(word) if eq_ignore_case(word, "timeout") => UnblockReply::Timeout,
        Some(word) if eq_ignore_case(word, "error") => UnblockReply::Error,
        Some(_) => {
            ctx.out
                .error("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
            return Action::None;
        }
    };
    let Some(id) = super::int_arg(ctx, args[2]) else {
        return Action::None;
    };
    // A client parked by WAIT or WAITAOF times out with the acknowledgements so far.
    let replication = &ctx.server.replication;
    let how = match (
        how,
        u64::try_from(id)
            .ok()
            .and_then(|id| replication.waiting.get(id)),
    ) {
        (UnblockReply::Timeout, Some(wait)) => {
            UnblockReply::WaitTimeout(wait.reply_now(replication))
        }
        _ => how,
    };
    // The caller runs a command, so it is not blocked: only another can be unblocked. A
    // SHUTDOWN client waits for the shutdown's outcome (Redis 7.0 would crash here).
    let unblocked = match u64::try_from(id) {
        Ok(id) if ctx.server.shutdown.clients.contains(&id) => None,
        Ok(id) if id != ctx.client.id => ctx.host.unblock_client(id, how),
        _ => None,
    };
    match unblocked {
        Some(blocked) => {
            ctx.server.blocked.unblock(id as u64, &blocked);
            ctx.server.replication.waiting.remove(id as u64);
            ctx.out.integer(1);
        }
        None => ctx.out.integer(0),
    }
    Action::None
}

/// MONITOR: from now on the session is sent every command others run. Ignored when it
/// already monitors.
pub fn monitor(ctx: &mut Ctx, _args: &Args) -> Action {
    if ctx.in_exec() {
        // Inside EXEC a client expects one reply per command (Redis's DENY_BLOCKING).
        ctx.out
            .error("ERR MONITOR isn't allowed for DENY BLOCKING client");
        return Action::None;
    }
    if ctx.client.modes.monitor {
        return Action::None;
    }
    ctx.client.modes.monitor = true;
    ctx.server.monitors.add(ctx.client.id);
    ctx.out.ok();
    Action::None
}
