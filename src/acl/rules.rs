//! Users and selectors, the rules that change them (`ACL SETUSER`'s words, a `user` line
//! of the config file or aclfile) and the text that describes them back (ACL LIST, ACL
//! GETUSER, ACL SAVE), after Redis 7.0's `ACLSetUser`, `ACLSetSelector` and
//! `ACLDescribeUser`.
//!
//! A rule never half-applies: SETUSER works on a copy of the user and keeps it only if
//! every rule parsed. Rules are bounded work: a selector is one level of parentheses
//! (a `(` inside one is a syntax error), patterns are stored as given and matched by
//! `crate::glob` (no recursion).

use super::table::{self, COMMAND_BITS, CommandBits, FUTURE_COMMANDS_BIT};
use sha2::Digest;

/// Why a rule was refused (Redis's errno cases, its texts via `Display`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// ENOENT: no such command or category.
    UnknownCommand,
    /// EINVAL.
    Syntax,
    /// EEXIST: a key pattern after `allkeys`.
    KeyAfterAllKeys,
    /// EISDIR: a channel pattern after `allchannels`.
    ChannelAfterAllChannels,
    /// ENODEV: `<pass` or `!hash` of a password the user does not have.
    NoSuchPassword,
    /// EBADMSG.
    BadHash,
    /// ECHILD: `+config|get|x`.
    FirstArgOfSubcommand,
    /// EALREADY: a user twice in the config file.
    Duplicate,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::KeyAfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::ChannelAfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
            RuleError::Duplicate => {
                "Duplicate user found. A user can only be defined once in config files"
            }
        })
    }
}

/// A key pattern and the access it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

/// One set of permissions: the user's root one (the rules outside parentheses) or a
/// selector `(...)`. A command is allowed when one selector allows it whole.
#[derive(Clone, Debug)]
pub struct Selector {
    pub root: bool,
    pub all_keys: bool,
    pub all_channels: bool,
    /// Every command, now and later: skip the bitmap.
    pub all_commands: bool,
    pub commands: CommandBits,
    /// Command id → first arguments allowed although the command is not (`+select|0`),
    /// in the order given.
    pub first_args: Vec<(usize, Vec<Vec<u8>>)>,
    pub keys: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// An empty selector: no command, key or channel, except all channels when
    /// `acl-pubsub-default` is `allchannels`.
    pub fn new(root: bool, pubsub_all: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels: pubsub_all,
            all_commands: false,
            commands: CommandBits::none(),
            first_args: Vec::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    fn first_args_of(&self, id: usize) -> Option<&Vec<Vec<u8>>> {
        self.first_args
            .iter()
            .find(|(command, _)| *command == id)
            .map(|(_, args)| args)
    }

    pub fn allows_first_arg(&self, id: usize, arg: &[u8]) -> bool {
        self.first_args_of(id)
            .is_some_and(|args| args.iter().any(|a| a.eq_ignore_ascii_case(arg)))
    }

    fn reset_first_args(&mut self, id: usize) {
        self.first_args.retain(|(command, _)| *command != id);
    }

    /// Sets the bit of command `id` (clearing one ends `all_commands`).
    fn set_bit(&mut self, id: usize, allow: bool) {
        self.commands.set(id, allow);
        if !allow {
            self.all_commands = false;
        }
    }

    /// Allows or blocks a command and, for a container, its subcommands.
    fn change(&mut self, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.reset_first_args(id);
        for &sub in &table::table().commands[id].subcommands {
            self.set_bit(sub, allow);
        }
    }

    fn change_category(&mut self, category: usize, allow: bool) {
        let table = table::table();
        if allow {
            self.commands.insert_all(&table.reach[category]);
        } else {
            self.commands.remove_all(&table.reach[category]);
            self.all_commands = false;
        }
        let members = &table.members[category];
        self.first_args.retain(|(id, _)| !members.get(*id));
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        let table = table::table();
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.commands = CommandBits::all();
            self.all_commands = true;
            self.first_args.clear();
        } else if is("nocommands") || is("-@all") {
            self.commands = CommandBits::none();
            self.all_commands = false;
            self.first_args.clear();
        } else if op.first() == Some(&b'~') || op.first() == Some(&b'%') {
            self.add_key_pattern(op)?;
        } else if op.first() == Some(&b'&') {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAllChannels);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.all_channels = false;
        } else if op.first() == Some(&b'+') && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let command = table.lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change(command.id, true);
                }
                Some(bar) => {
                    let command = table
                        .lookup(&name[..bar])
                        .ok_or(RuleError::UnknownCommand)?;
                    if command.parent.is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !command.subcommands.is_empty() {
                        let sub = table.lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change(sub.id, true);
                    } else {
                        // SELECT|0, DEBUG|OBJECT: a first argument of a command that
                        // stays blocked otherwise (deprecated in Redis, still honoured).
                        let id = command.id;
                        match self.first_args.iter_mut().find(|(c, _)| *c == id) {
                            Some((_, args)) => {
                                if !args.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                                    args.push(sub.to_vec());
                                }
                            }
                            None => self.first_args.push((id, vec![sub.to_vec()])),
                        }
                    }
                }
            }
        } else if op.first() == Some(&b'-') && op.get(1) != Some(&b'@') {
            let command = table.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change(command.id, false);
        } else if (op.first() == Some(&b'+') || op.first() == Some(&b'-'))
            && op.get(1) == Some(&b'@')
        {
            let category = table::category(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.change_category(category, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// `~pattern`, `%R~pattern`, `%W~pattern`, `%RW~pattern`.
    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::KeyAfterAllKeys);
        }
        let (mut read, mut write) = (true, true);
        let mut offset = 1;
        if op[0] == b'%' {
            (read, write) = (false, false);
            while offset < op.len() {
                match op[offset] {
                    b'R' | b'r' if !read => read = true,
                    b'W' | b'w' if !write => write = true,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            // `%` and `%~` grant nothing: redis-server 7.0.15 refuses them.
            if !read && !write {
                return Err(RuleError::Syntax);
            }
        }
        let pattern = &op[offset..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        self.all_keys = false;
        Ok(())
    }

    /// The selector's rules as text (Redis's `ACLDescribeSelector`): keys, channels, then
    /// commands.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for key in &self.keys {
                describe_key_pattern(&mut out, key);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for channel in &self.channels {
                out.push(b'&');
                out.extend_from_slice(channel);
                out.push(b' ');
            }
        }
        out.extend_from_slice(&self.describe_commands());
        out
    }

    /// ACL GETUSER's `keys` field.
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (index, key) in self.keys.iter().enumerate() {
            if index > 0 {
                out.push(b' ');
            }
            describe_key_pattern(&mut out, key);
        }
        out
    }

    /// ACL GETUSER's `channels` field.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (index, channel) in self.channels.iter().enumerate() {
            if index > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(channel);
        }
        out
    }

    /// The command rules that rebuild this selector's bitmap (Redis's
    /// `ACLDescribeSelectorCommandRules`): `+@all` or `-@all`, then the categories that
    /// fit best, then single commands and first arguments. Single commands come in table
    /// order (name order); Redis lists them in its hash table's order.
    pub fn describe_commands(&self) -> Vec<u8> {
        let table = table::table();
        let mut rules: Vec<u8> = Vec::new();
        // Built alongside: what the rules so far give, and what is left to explain.
        let additive = !self.commands.get(FUTURE_COMMANDS_BIT);
        let mut predicted = Selector::new(false, false);
        if additive {
            rules.extend_from_slice(b"-@all ");
        } else {
            rules.extend_from_slice(b"+@all ");
            predicted.apply(b"+@all").expect("a valid rule");
        }
        let mut remaining = Selector::new(false, false);
        remaining.commands = self.commands.clone();
        let mut applied = [false; table::CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut least_different, mut most_same) = (u32::MAX, 0);
            for (index, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let (on, off) = remaining.commands.count_in(&table.members[index]);
                let (different, same) = if additive { (off, on) } else { (on, off) };
                if same > different
                    && (different < least_different
                        || (different == least_different && same > most_same))
                {
                    best = Some(index);
                    least_different = different;
                    most_same = same;
                }
            }
            let Some(best) = best else { break };
            predicted.change_category(best, additive);
            remaining.change_category(best, !additive);
            rules.push(if additive { b'+' } else { b'-' });
            rules.push(b'@');
            rules.extend_from_slice(table::CATEGORIES[best].as_bytes());
            rules.push(b' ');
            applied[best] = true;
        }
        for &top in &table.top_level {
            self.describe_single(&mut predicted, &mut rules, top);
            for &sub in &table.commands[top].subcommands {
                self.describe_single(&mut predicted, &mut rules, sub);
            }
        }
        rules.pop(); // the last space
        debug_assert!(
            (0..COMMAND_BITS).all(|id| predicted.commands.get(id) == self.commands.get(id)),
            "the described rules do not rebuild the bitmap"
        );
        rules
    }

    fn describe_single(&self, predicted: &mut Selector, rules: &mut Vec<u8>, id: usize) {
        let command = &table::table().commands[id];
        let allowed = self.commands.get(id);
        if allowed != predicted.commands.get(id) {
            rules.push(if allowed { b'+' } else { b'-' });
            rules.extend_from_slice(command.full_name.as_bytes());
            rules.push(b' ');
            predicted.change(id, allowed);
        }
        if !allowed && let Some(args) = self.first_args_of(id) {
            for arg in args {
                rules.push(b'+');
                rules.extend_from_slice(command.full_name.as_bytes());
                rules.push(b'|');
                rules.extend_from_slice(arg);
                rules.push(b' ');
            }
        }
    }
}

fn describe_key_pattern(out: &mut Vec<u8>, key: &KeyPattern) {
    out.extend_from_slice(match (key.read, key.write) {
        (true, true) => b"~".as_slice(),
        (true, false) => b"%R~",
        (false, true) => b"%W~",
        (false, false) => unreachable!("a key pattern grants something"),
    });
    out.extend_from_slice(&key.pattern);
}

/// Redis's `ACLStringHasSpaces`: whitespace or NUL, refused in names and patterns.
pub fn has_spaces(text: &[u8]) -> bool {
    text.iter()
        .any(|&b| b == 0 || b == b' ' || (b'\t'..=b'\r').contains(&b))
}

/// A password's SHA-256 as 64 lowercase hex digits (how users keep passwords).
pub fn hash_password(password: &[u8]) -> [u8; 64] {
    let digest = sha2::Sha256::digest(password);
    let mut hex = [0u8; 64];
    for (i, byte) in digest.iter().enumerate() {
        hex[2 * i] = b"0123456789abcdef"[(byte >> 4) as usize];
        hex[2 * i + 1] = b"0123456789abcdef"[(byte & 15) as usize];
    }
    hex
}

fn parse_hash(text: &[u8]) -> Result<[u8; 64], RuleError> {
    if text.len() != 64 || !text.iter().all(|&b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(RuleError::BadHash);
    }
    let mut hash = [0u8; 64];
    hash.copy_from_slice(text);
    Ok(hash)
}

/// Compares in time independent of where the hashes differ.
fn same_hash(a: &[u8; 64], b: &[u8; 64]) -> bool {
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// A user: whether it may log in, its passwords (SHA-256 hex), and its selectors (the
/// root one first).
#[derive(Clone, Debug)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) / `skip-sanitize-payload` (Some(false)); neither
    /// for a user created without `reset`.
    pub sanitize_payload: Option<bool>,
    pub passwords: Vec<[u8; 64]>,
    pub selectors: Vec<Selector>,
}

impl User {
    /// A new user: off, no password, nothing allowed (Redis's `ACLCreateUser`).
    pub fn new(name: &[u8], pubsub_all: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize_payload: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, pubsub_all)],
        }
    }

    /// The `default` user as Redis creates it: on, nopass, every command, key and channel.
    pub fn new_default(pubsub_all: bool) -> User {
        let mut user = User::new(b"default", pubsub_all);
        for rule in ["+@all", "~*", "&*", "on", "nopass"] {
            user.apply(rule.as_bytes(), pubsub_all)
                .expect("the default user's rules");
        }
        user
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    /// Whether `password` logs in as this user (the user must also be on).
    pub fn password_matches(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        self.passwords.iter().any(|p| same_hash(p, &hashed))
    }

    /// Applies one rule (Redis's `ACLSetUser`); selector rules go to the root selector.
    pub fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if op.is_empty() {
            return Ok(());
        }
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize_payload = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize_payload = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                parse_hash(&op[1..])?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                parse_hash(&op[1..])?
            };
            let position = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(position);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut selector = Selector::new(false, pubsub_all);
            let inner = &op[1..op.len() - 1];
            // Unbalanced quotes inside give an empty selector, as Redis's split does.
            for rule in crate::resp::split_args(inner).unwrap_or_default() {
                selector.apply(&rule)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.all_keys = false;
            root.keys.clear();
            root.all_channels = pubsub_all;
            root.channels.clear();
            self.enabled = false;
            self.sanitize_payload = Some(true);
            self.selectors.truncate(1);
            self.selectors[0].apply(b"-@all").expect("a valid rule");
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// The user's rules as one line (ACL LIST, ACL SAVE), Redis's `ACLDescribeUser`.
    pub fn describe(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for flag in self.flags() {
            out.extend_from_slice(flag.as_bytes());
            out.push(b' ');
        }
        for password in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(password);
            out.push(b' ');
        }
        for selector in &self.selectors {
            if selector.root {
                out.extend_from_slice(&selector.describe());
            } else {
                out.extend_from_slice(b" (");
                out.extend_from_slice(&selector.describe());
                out.push(b')');
            }
        }
        out
    }

    /// ACL GETUSER's `flags`, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize_payload {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// Applies `rules` to a copy and returns it, or the first rule refused (Redis's
    /// `ACLStringSetUser`: selectors spread over several words are joined first).
    pub fn with_rules(&self, rules: &[&[u8]], pubsub_all: bool) -> Result<User, SetUserError> {
        let merged = merge_selectors(rules).map_err(SetUserError::UnmatchedParenthesis)?;
        let mut user = self.clone();
        for rule in &merged {
            user.apply(rule, pubsub_all)
                .map_err(|error| SetUserError::Rule(rule.clone(), error))?;
        }
        Ok(user)
    }
}

/// Why ACL SETUSER refused its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetUserError {
    /// The word that opens a selector never closed.
    UnmatchedParenthesis(Vec<u8>),
    Rule(Vec<u8>, RuleError),
}

impl std::fmt::Display for SetUserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetUserError::UnmatchedParenthesis(word) => write!(
                f,
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(word)
            ),
            SetUserError::Rule(rule, error) => write!(
                f,
                "Error in ACL SETUSER modifier '{}': {error}",
                String::from_utf8_lossy(rule)
            ),
        }
    }
}

/// Joins a selector written over several words (`(+get` `~k*)`) into one (Redis's
/// `ACLMergeSelectorArguments`); Err(the opening word) if one never closes.
pub fn merge_selectors(words: &[&[u8]]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut merged = Vec::with_capacity(words.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (index, word) in words.iter().enumerate() {
        // As Redis's: an opening word starts a selector afresh, even inside one.
        if word.first() == Some(&b'(') && word.last() != Some(&b')') {
            open = Some((index, word.to_vec()));
            continue;
        }
        if let Some((_, selector)) = &mut open {
            selector.push(b' ');
            selector.extend_from_slice(word);
            if word.last() == Some(&b')') {
                merged.push(open.take().expect("open").1);
            }
            continue;
        }
        merged.push(word.to_vec());
    }
    match open {
        Some((index, _)) => Err(words[index].to_vec()),
        None => Ok(merged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let words: Vec<&[u8]> = rules.iter().map(|r| r.as_bytes()).collect();
        User::new(b"u", false).with_rules(&words, false).unwrap()
    }

    #[test]
    fn describes_as_redis_does() {
        assert_eq!(
            String::from_utf8(User::new_default(false).describe()).unwrap(),
            "on nopass ~* &* +@all"
        );
        assert_eq!(
            String::from_utf8(User::new(b"bob", false).describe()).unwrap(),
            "off resetchannels -@all"
        );
        let alice = user(&[
            "on",
            ">p1",
            "~k*",
            "%R~r*",
            "&ch*",
            "+@read",
            "-get",
            "+select|0",
            "(+set",
            "~s*)",
        ]);
        assert_eq!(
            String::from_utf8(alice.describe()).unwrap(),
            "on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a ~k* %R~r* resetchannels &ch* -@all +@read -get +select|0 (~s* resetchannels -@all +set)"
        );
        assert_eq!(
            String::from_utf8(user(&["reset"]).describe()).unwrap(),
            "off sanitize-payload resetchannels -@all"
        );
        assert_eq!(
            String::from_utf8(user(&["+@all", "-@string"]).describe()).unwrap(),
            "off resetchannels +@all -@string"
        );
    }

    #[test]
    fn refuses_as_redis_does() {
        let refused = |rule: &str| {
            User::new(b"u", false)
                .with_rules(&[rule.as_bytes()], false)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refused("+"),
            "Error in ACL SETUSER modifier '+': Unknown command or category name in ACL"
        );
        assert!(refused("+get|").ends_with("Syntax error"));
        assert!(refused("%").ends_with("Syntax error"));
        assert!(refused("~a b").ends_with("Syntax error"));
        assert!(refused("+config|get|x").ends_with("not supported"));
        assert!(refused("((+get))").ends_with("Syntax error"));
        assert_eq!(
            User::new(b"u", false)
                .with_rules(&[b"(", b"+get"], false)
                .unwrap_err()
                .to_string(),
            "Unmatched parenthesis in acl selector starting at '('."
        );
    }
}
