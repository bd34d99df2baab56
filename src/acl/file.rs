//! Users from the configuration: `user` lines of the config file (checked as they are
//! read, applied at start-up) and the aclfile (`aclfile`, ACL LOAD / ACL SAVE), with
//! Redis 7.0's rules and error texts. Loading is all or nothing: a file with one bad line
//! changes no user.

use super::rules::{RuleError, User, has_spaces, merge_selectors};
use std::collections::BTreeMap;

/// Checks a `user <name> <rules...>` line of the config file (Redis's
/// `ACLAppendUserForLoading`); unknown commands are let through (Redis reports them at
/// start-up). Err: the word Redis names (Redis indexes the line's words with the rule's
/// position among the rules, so it names the wrong word; kept for identical messages)
/// and the reason.
pub fn check_config_user(
    words: &[String],
    earlier: &[Vec<String>],
    pubsub_all: bool,
) -> Result<(), (String, RuleError)> {
    let name = &words[0];
    if earlier.iter().any(|user| user.first() == Some(name)) {
        return Err((name.clone(), RuleError::Duplicate));
    }
    let rules: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
    // Redis reports the word at the opening's position counted among the rules, and an
    // errno left over from before; a syntax error is what it says in practice.
    let merged = merge_selectors(&rules).map_err(|opening| {
        let position = rules
            .iter()
            .position(|r| *r == opening.as_slice())
            .unwrap_or(0);
        (word_at(words, position), RuleError::Syntax)
    })?;
    let mut user = User::new(name.as_bytes(), pubsub_all);
    for (index, rule) in merged.iter().enumerate() {
        match user.apply(rule, pubsub_all) {
            Ok(()) | Err(RuleError::UnknownCommand) => {}
            Err(error) => return Err((word_at(words, index), error)),
        }
    }
    Ok(())
}

/// `user` and the line's words: Redis's `argv[index]` with `argv[0] == "user"`.
fn word_at(words: &[String], index: usize) -> String {
    if index == 0 {
        "user".to_string()
    } else {
        words.get(index - 1).cloned().unwrap_or_default()
    }
}

/// Applies the config file's `user` lines at start-up (Redis's `ACLLoadConfiguredUsers`)
/// to `users`, which holds the default user. Err: what Redis logs before it exits.
pub fn apply_config_users(
    users: &mut BTreeMap<Vec<u8>, User>,
    lines: &[Vec<String>],
    pubsub_all: bool,
) -> Result<(), String> {
    for words in lines {
        let name = words[0].as_bytes();
        if has_spaces(name) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let user = users
            .entry(name.to_vec())
            .or_insert_with(|| User::new(name, pubsub_all));
        if name == b"default" {
            user.apply(b"reset", pubsub_all).expect("reset is valid");
        }
        let rules: Vec<&[u8]> = words[1..].iter().map(|w| w.as_bytes()).collect();
        let merged = merge_selectors(&rules).map_err(|_| "Unmatched parenthesis".to_string())?;
        for rule in &merged {
            user.apply(rule, pubsub_all).map_err(|error| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{}': {error}",
                    String::from_utf8_lossy(rule),
                    words[0]
                )
            })?;
        }
        if !user.enabled {
            tracing::info!(
                "The user '{}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.",
                words[0]
            );
        }
    }
    Ok(())
}

/// Parses an aclfile (Redis's `ACLLoadFromFile`): the users it defines, the default user
/// included (a fresh one when the file has none), or every problem found as one line of
/// text. `shown_name` is the file's name as configured, for the messages.
pub fn parse_acl_file(
    text: &[u8],
    shown_name: &str,
    pubsub_all: bool,
) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let mut errors = String::new();
    let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
    for (index, line) in text.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let line = trim(line, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if words[0] != b"user" || words.len() < 2 {
            errors.push_str(&format!(
                "{shown_name}:{number} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = words[1];
        if has_spaces(name) {
            errors.push_str(&format!(
                "'{shown_name}:{number}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {number}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let mut user = User::new(name, pubsub_all);
        let merged = match merge_selectors(&words[2..]) {
            Ok(merged) => merged,
            Err(_) => {
                errors.push_str(&format!(
                    "{shown_name}:{number}: Unmatched parenthesis in selector definition."
                ));
                Vec::new()
            }
        };
        let mut syntax_error = false;
        for rule in &merged {
            let rule = trim(rule, b"\t\r\n");
            match user.apply(rule, pubsub_all) {
                Ok(()) => {}
                Err(RuleError::UnknownCommand) => errors.push_str(&format!(
                    "{shown_name}:{number}: Error in applying operation '{}': {}. ",
                    String::from_utf8_lossy(rule),
                    RuleError::UnknownCommand
                )),
                Err(error) if !syntax_error => {
                    errors.push_str(&format!("{shown_name}:{number}: {error}. "));
                    syntax_error = true;
                }
                Err(_) => {}
            }
        }
        users.insert(name.to_vec(), user);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    users
        .entry(b"default".to_vec())
        .or_insert_with(|| User::new_default(pubsub_all));
    Ok(users)
}

/// The aclfile text for `users` (ACL SAVE): one `user <name> <rules>` line each, in name
/// order.
pub fn acl_file_text(users: &BTreeMap<Vec<u8>, User>) -> Vec<u8> {
    let mut text = Vec::new();
    for (name, user) in users {
        text.extend_from_slice(b"user ");
        text.extend_from_slice(name);
        text.push(b' ');
        text.extend_from_slice(&user.describe());
        text.push(b'\n');
    }
    text
}

fn trim<'a>(mut bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let Some((first, rest)) = bytes.split_first()
        && set.contains(first)
    {
        bytes = rest;
    }
    while let Some((last, rest)) = bytes.split_last()
        && set.contains(last)
    {
        bytes = rest;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_loads_whole_or_not_at_all() {
        let users =
            parse_acl_file(b"user alice on >p ~k* +get\n\nuser bob off\n", "f", false).unwrap();
        assert_eq!(users.len(), 3);
        assert!(users[&b"default"[..]].nopass);
        let error = parse_acl_file(
            b"user a on\nuser a off\nfoo\nuser b +nosuch ~a b",
            "f",
            false,
        )
        .unwrap_err();
        assert_eq!(
            error,
            "WARNING: Duplicate user 'a' found on line 2. f:3 should start with user keyword followed by the username. f:4: Error in applying operation '+nosuch': Unknown command or category name in ACL. f:4: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
    }
}
