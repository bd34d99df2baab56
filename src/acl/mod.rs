//! Access control with Redis 7.0's model: who may run which command on which keys and
//! channels.
//!
//! This module owns the users (`rules::User`: on/off, SHA-256 password hashes, selectors),
//! the rules that change them and the text that describes them (`rules`), Redis 7.0's
//! command table as ACL sees it (`table`: ids, categories, key specs), the permission
//! check (`check`), the log of denials (`log`) and the users' files (`file`: `user` lines
//! of the config, the aclfile). It owns no session: a session names its user
//! (`SessionUser`), and whoever holds the sessions closes those a change of users dooms
//! (`Doomed`).
//!
//! The check sits in the engine's one refusal path (`Engine::refusal`, and its script and
//! EXEC forms): after authentication and MULTI's own rules, before the rest, as Redis's
//! `processCommand` does. The ACL command's handler is `commands::acl`.

pub mod check;
pub mod file;
pub mod log;
pub mod rules;
pub mod table;

pub use check::Denied;
pub use rules::{SetUserError, User};

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The user a session is authenticated as, by name (a session never outlives its user:
/// deleting a user closes its sessions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionUser(pub Arc<[u8]>);

impl SessionUser {
    pub fn named(name: &[u8]) -> SessionUser {
        if name == b"default" {
            SessionUser::default()
        } else {
            SessionUser(Arc::from(name))
        }
    }

    pub fn name(&self) -> &[u8] {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        &*self.0 == b"default"
    }
}

impl Default for SessionUser {
    fn default() -> Self {
        static DEFAULT: OnceLock<Arc<[u8]>> = OnceLock::new();
        SessionUser(DEFAULT.get_or_init(|| Arc::from(&b"default"[..])).clone())
    }
}

/// Sessions a change of users closes: Redis kills them after the command's reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Doomed {
    /// Sessions authenticated as one of these users (ACL DELUSER; ACL LOAD: every user
    /// but `default`).
    UsersNamed(Vec<Vec<u8>>),
    /// Subscribers of `user` whose channels or patterns the user's new channel rules no
    /// longer allow (ACL SETUSER that revokes channels): `allowed` is every channel
    /// pattern of the new rules.
    Subscribers {
        user: Vec<u8>,
        allowed: Vec<Vec<u8>>,
    },
}

impl Doomed {
    /// Whether a session of `user` with these subscriptions is doomed.
    pub fn includes(
        &self,
        user: &SessionUser,
        subscriptions: &crate::pubsub::Subscriptions,
    ) -> bool {
        match self {
            Doomed::UsersNamed(names) => names.iter().any(|n| n.as_slice() == user.name()),
            Doomed::Subscribers {
                user: name,
                allowed,
            } => {
                name.as_slice() == user.name()
                    && subscriptions.any()
                    && subscriptions.iter_all().any(|(kind, channel)| {
                        let pattern = kind == crate::pubsub::Kind::Pattern;
                        !check::channel_allowed(allowed, channel, pattern)
                    })
            }
        }
    }
}

/// A denied command, for the reply and the log.
#[derive(Clone, Debug)]
pub struct Denial {
    pub denied: Denied,
    /// The command's full name (`get`, `config|get`).
    pub command: String,
}

/// The users and the log of denials.
pub struct Acl {
    users: BTreeMap<Vec<u8>, User>,
    pub log: log::Log,
}

impl Acl {
    /// Only the default user: on, no password, everything allowed.
    pub fn new() -> Acl {
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), User::new_default(false));
        Acl {
            users,
            log: log::Log::default(),
        }
    }

    /// The users at start-up (Redis's order): `requirepass` sets the default user's
    /// password, then the config file's `user` lines or the aclfile (never both).
    /// `read_acl_file` reads the aclfile (only called when there is one). Err: what Redis
    /// logs before exiting.
    pub fn at_startup(
        config: &crate::config::Config,
        read_acl_file: impl FnOnce() -> Result<Vec<u8>, String>,
    ) -> Result<Acl, String> {
        let mut acl = Acl::new();
        let pubsub_all = config.acl_pubsub_default_all;
        acl.set_default_password(config.requirepass.as_deref().map(str::as_bytes));
        if !config.aclfile.is_empty() && !config.acl_users.is_empty() {
            return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
        }
        file::apply_config_users(&mut acl.users, &config.acl_users, pubsub_all)
            .map_err(|error| format!("{error}\nCritical error while loading ACLs. Exiting."))?;
        if !config.aclfile.is_empty() {
            let text = read_acl_file()?;
            let users =
                file::parse_acl_file(&text, &config.aclfile, pubsub_all).map_err(|errors| {
                    format!("Aborting Redis startup because of ACL errors: {errors}")
                })?;
            acl.users = users;
        }
        Ok(acl)
    }

    /// `requirepass` (None or empty: nopass), as Redis's `ACLUpdateDefaultUserPassword`.
    pub fn set_default_password(&mut self, password: Option<&[u8]>) {
        let default = self.default_user_mut();
        default.apply(b"resetpass", false).expect("valid");
        match password {
            Some(password) if !password.is_empty() => {
                let mut rule = b">".to_vec();
                rule.extend_from_slice(password);
                default.apply(&rule, false).expect("valid");
            }
            _ => default.apply(b"nopass", false).expect("valid"),
        }
    }

    fn default_user_mut(&mut self) -> &mut User {
        self.users
            .get_mut(&b"default"[..])
            .expect("the default user always exists")
    }

    pub fn default_user(&self) -> &User {
        &self.users[&b"default"[..]]
    }

    /// Whether a new connection starts authenticated (the default user is on and needs
    /// no password), Redis's `clientSetDefaultAuth`.
    pub fn new_sessions_authenticated(&self) -> bool {
        let default = self.default_user();
        default.nopass && default.enabled
    }

    /// Whether an unauthenticated session must AUTH first (Redis's `authRequired`).
    pub fn auth_required(&self) -> bool {
        let default = self.default_user();
        !default.nopass || !default.enabled
    }

    pub fn user(&self, name: &[u8]) -> Option<&User> {
        self.users.get(name)
    }

    pub fn users(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Whether `name` / `password` log in (the user exists, is on, and the password
    /// matches or it needs none).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> bool {
        self.users
            .get(name)
            .is_some_and(|user| user.enabled && user.password_matches(password))
    }

    /// ACL SETUSER: creates or changes `name`, all rules or none. Ok: the sessions to
    /// close (subscribers whose channels were revoked), if any.
    pub fn set_user(
        &mut self,
        name: &[u8],
        rules: &[&[u8]],
        pubsub_all: bool,
    ) -> Result<Option<Doomed>, SetUserError> {
        let existing = self.users.get(name);
        let base = existing
            .cloned()
            .unwrap_or_else(|| User::new(name, pubsub_all));
        let updated = base.with_rules(rules, pubsub_all)?;
        let doomed = existing.and_then(|old| revoked_channels(old, &updated));
        self.users.insert(name.to_vec(), updated);
        Ok(doomed)
    }

    /// ACL DELUSER: removes the users that exist (never `default`); returns their names.
    pub fn delete_users(&mut self, names: &[&[u8]]) -> Vec<Vec<u8>> {
        names
            .iter()
            .filter_map(|name| self.users.remove(*name).map(|_| name.to_vec()))
            .collect()
    }

    /// ACL LOAD: replaces every user by the file's. Ok: the sessions to close (those of
    /// every user but `default`, whose rules are replaced in place, as Redis does).
    pub fn load(
        &mut self,
        text: &[u8],
        shown_name: &str,
        pubsub_all: bool,
    ) -> Result<Doomed, String> {
        let users = file::parse_acl_file(text, shown_name, pubsub_all)?;
        let old: Vec<Vec<u8>> = self
            .users
            .keys()
            .filter(|name| name.as_slice() != b"default")
            .cloned()
            .collect();
        self.users = users;
        Ok(Doomed::UsersNamed(old))
    }

    /// ACL SAVE's text.
    pub fn file_text(&self) -> Vec<u8> {
        file::acl_file_text(&self.users)
    }

    /// May `user` run the command `name` (Tessera's table name) with `argv`?
    pub fn check(&self, user: &SessionUser, name: &str, argv: &[&[u8]]) -> Result<(), Denial> {
        let Some(found) = self.users.get(user.name()) else {
            return Err(Denial {
                denied: Denied::Command,
                command: name.to_string(),
            });
        };
        if check::unrestricted(found) {
            return Ok(());
        }
        let Some(command) = table::table().for_request(name, argv) else {
            return Err(Denial {
                denied: Denied::Command,
                command: name.to_string(),
            });
        };
        check::check(found, command, argv).map_err(|denied| Denial {
            denied,
            // A later command checked as a 7.0 one is named as itself.
            command: match table::checked_as(name) {
                Some(_) => name.to_string(),
                None => command.full_name.clone(),
            },
        })
    }

    /// Whether `user` may read every key while running the command `name` with `argv`
    /// (`check::reads_every_key`): SORT's condition for its BY and GET patterns.
    pub fn reads_every_key(&self, user: &SessionUser, name: &str, argv: &[&[u8]]) -> bool {
        let Some(found) = self.users.get(user.name()) else {
            return false;
        };
        if check::unrestricted(found) {
            return true;
        }
        table::table()
            .for_request(name, argv)
            .is_some_and(|command| check::reads_every_key(found, command, argv))
    }
}

impl Default for Acl {
    fn default() -> Self {
        Acl::new()
    }
}

/// Redis's `ACLKillPubsubClientsIfNeeded`: when the new rules are not a superset of the
/// old channels, the user's subscribers must be checked against the new ones.
fn revoked_channels(old: &User, new: &User) -> Option<Doomed> {
    if new.selectors.iter().any(|s| s.all_channels) {
        return None;
    }
    let allowed: Vec<Vec<u8>> = new
        .selectors
        .iter()
        .flat_map(|s| s.channels.iter().cloned())
        .collect();
    let superset = old
        .selectors
        .iter()
        .all(|s| !s.all_channels && s.channels.iter().all(|c| allowed.contains(c)));
    (!superset).then(|| Doomed::Subscribers {
        user: new.name.clone(),
        allowed,
    })
}

/// ACL GENPASS: `bits` random bits as hex (rounded up to a whole digit), from the
/// operating system's CSPRNG.
pub fn generate_password(bits: usize) -> String {
    let digits = bits.div_ceil(4);
    let mut bytes = vec![0u8; digits.div_ceil(2)];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    let mut hex = String::with_capacity(digits + 1);
    for byte in bytes {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex.truncate(digits);
    hex
}
