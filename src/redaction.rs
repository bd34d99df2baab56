//! Which arguments of a command MONITOR and SLOWLOG show as `(redacted)`: passwords and
//! ACL rules, as Redis's commands mark them with `redactClientCommandArgument` while they
//! parse (so a command that stops at a syntax error before a secret does not redact it).
//! One table for both, so that the two views never disagree.

use smallvec::SmallVec;

/// What a redacted argument shows instead.
pub const REDACTED: &[u8] = b"(redacted)";

/// The positions in `argv` (the command's name at 0) to redact; `name` is the command's
/// name in the table.
pub fn positions(name: &str, argv: &[&[u8]]) -> SmallVec<[usize; 4]> {
    let mut out = SmallVec::new();
    match name {
        // AUTH [user] password: more arguments are a syntax error, found first.
        "auth" if argv.len() <= 3 => out.extend(1..argv.len()),
        "hello" => hello(argv, &mut out),
        "migrate" => migrate(argv, &mut out),
        // The user's name and every rule (passwords among them).
        "acl" if argv.len() >= 3 && argv[1].eq_ignore_ascii_case(b"setuser") => {
            out.extend(2..argv.len());
        }
        // The values of the sensitive directives; an odd count is refused first.
        "config"
            if argv.len() >= 4
                && argv.len().is_multiple_of(2)
                && argv[1].eq_ignore_ascii_case(b"set") =>
        {
            for at in (2..argv.len()).step_by(2) {
                let directive = argv[at];
                if [&b"requirepass"[..], b"masterauth", b"masteruser"]
                    .iter()
                    .any(|sensitive| directive.eq_ignore_ascii_case(sensitive))
                {
                    out.push(at + 1);
                }
            }
        }
        _ => {}
    }
    out
}

/// HELLO [protover [AUTH user pass] [SETNAME name]]: a bad version stops before the
/// options; the options are read until the first bad one.
fn hello(argv: &[&[u8]], out: &mut SmallVec<[usize; 4]>) {
    let version = argv.get(1).and_then(|v| crate::resp::parse_i64(v));
    if argv.len() >= 2 && !matches!(version, Some(2 | 3)) {
        return;
    }
    let mut at = 2;
    while at < argv.len() {
        let remaining = argv.len() - at - 1;
        if argv[at].eq_ignore_ascii_case(b"auth") && remaining >= 2 {
            out.extend([at + 1, at + 2]);
            at += 3;
        } else if argv[at].eq_ignore_ascii_case(b"setname") && remaining >= 1 {
            at += 2;
        } else {
            break;
        }
    }
}

/// MIGRATE host port key db timeout [COPY] [REPLACE] [AUTH pass | AUTH2 user pass]
/// [KEYS key...]: its options are read from the sixth argument until KEYS or a bad one.
fn migrate(argv: &[&[u8]], out: &mut SmallVec<[usize; 4]>) {
    let mut at = 6;
    while at < argv.len() {
        let remaining = argv.len() - at - 1;
        let option = argv[at];
        if option.eq_ignore_ascii_case(b"copy") || option.eq_ignore_ascii_case(b"replace") {
            at += 1;
        } else if option.eq_ignore_ascii_case(b"auth") && remaining >= 1 {
            out.push(at + 1);
            at += 2;
        } else if option.eq_ignore_ascii_case(b"auth2") && remaining >= 2 {
            out.extend([at + 1, at + 2]);
            at += 3;
        } else {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(line: &str) -> Vec<usize> {
        let argv: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let name = line.split(' ').next().unwrap().to_ascii_lowercase();
        positions(&name, &argv).to_vec()
    }

    #[test]
    fn secrets_are_found_where_redis_redacts_them() {
        assert_eq!(of("auth pw"), [1]);
        assert_eq!(of("auth user pw"), [1, 2]);
        assert_eq!(of("auth a b c"), Vec::<usize>::new());
        assert_eq!(of("hello 3 AUTH u p SETNAME n"), [3, 4]);
        assert_eq!(of("hello 4 AUTH u p"), Vec::<usize>::new());
        assert_eq!(of("hello 3 SETNAME n bogus AUTH u p"), Vec::<usize>::new());
        assert_eq!(of("migrate h 1 k 0 5000"), Vec::<usize>::new());
        assert_eq!(of("migrate h 1 k 0 5000 AUTH pw"), [7]);
        assert_eq!(of("migrate h 1 k 0 5000 COPY AUTH2 u pw"), [8, 9]);
        assert_eq!(of("migrate h 1 k 0 5000 KEYS AUTH x"), Vec::<usize>::new());
        assert_eq!(of("acl SETUSER u >pw on"), [2, 3, 4]);
        assert_eq!(
            of("config SET requirepass a maxmemory 1 MASTERAUTH b"),
            [3, 7]
        );
        assert_eq!(
            of("config SET requirepass a maxmemory"),
            Vec::<usize>::new()
        );
    }
}
