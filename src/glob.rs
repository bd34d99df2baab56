//! Glob-style pattern matching with Redis's rules (KEYS, SCAN MATCH, CONFIG GET):
//! `*`, `?`, `[abc]`, `[^abc]`, `[a-z]`, and `\` to escape the next character.

/// Redis treats a pattern that nests more stars than this as matching nothing (its
/// matcher recurses once per star; the cap answers CVE-2024-31228). Tessera's matcher does
/// not recurse, but answers as Redis does.
const NESTING_MAX: usize = 1000;

pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    let (mut p, mut t) = (0usize, 0usize);
    // Where to resume after the most recent `*`: (pattern index after it, text index).
    let mut backtrack: Option<(usize, usize)> = None;
    // Stars passed with text left (Redis's recursion depth, which it caps: CVE-2024-31228).
    let mut nesting = 0usize;
    loop {
        if p < pattern.len() {
            let matched_len = match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    if t < text.len() {
                        // Each star group is reached once: a backtrack resumes after
                        // the last one.
                        nesting += 1;
                        if nesting > NESTING_MAX {
                            return false;
                        }
                    }
                    backtrack = Some((p, t));
                    continue;
                }
                b'?' if t < text.len() => Some(1),
                b'[' if t < text.len() => match_class(pattern, &mut p, text[t], nocase),
                b'\\' if p + 1 < pattern.len() && t < text.len() => {
                    p += 1;
                    eq(pattern[p], text[t]).then_some(1)
                }
                c if t < text.len() && eq(c, text[t]) => Some(1),
                _ => None,
            };
            if matched_len.is_some() {
                p += 1;
                t += 1;
                continue;
            }
        } else if t == text.len() {
            return true;
        }
        // Mismatch: let the last `*` swallow one more character, or fail.
        match backtrack {
            Some((star_p, star_t)) if star_t < text.len() => {
                backtrack = Some((star_p, star_t + 1));
                p = star_p;
                t = star_t + 1;
            }
            _ => return false,
        }
    }
}

/// Matches `c` against the class starting at `pattern[*p] == '['`; leaves `*p` on the
/// closing `]` (or the last byte if unterminated, as Redis does).
fn match_class(pattern: &[u8], p: &mut usize, c: u8, nocase: bool) -> Option<usize> {
    let lower = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
    *p += 1;
    let negate = *p < pattern.len() && pattern[*p] == b'^';
    if negate {
        *p += 1;
    }
    let mut matched = false;
    while *p < pattern.len() {
        if pattern[*p] == b'\\' && *p + 1 < pattern.len() {
            *p += 1;
            matched |= lower(pattern[*p]) == lower(c);
        } else if pattern[*p] == b']' {
            break;
        } else if *p + 2 < pattern.len() && pattern[*p + 1] == b'-' {
            let (mut start, mut end) = (lower(pattern[*p]), lower(pattern[*p + 2]));
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            *p += 2;
            matched |= (start..=end).contains(&lower(c));
        } else {
            matched |= lower(pattern[*p]) == lower(c);
        }
        *p += 1;
    }
    if *p >= pattern.len() {
        *p = pattern.len() - 1;
    }
    (matched != negate).then_some(1)
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn patterns() {
        let m = |p: &str, t: &str| glob_match(p.as_bytes(), t.as_bytes(), false);
        assert!(m("*", ""));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("key:*:x", "key:1:2:x"));
        assert!(!m("key:*:x", "key:1:2:y"));
        assert!(m("a\\*b", "a*b"));
        assert!(!m("a\\*b", "axb"));
        assert!(glob_match(b"MAX*", b"maxclients", true));
    }

    /// Redis's cap on nested stars (CVE-2024-31228), as redis-server 7.0.15 answers: 1,000
    /// star groups with text left match, 1,001 match nothing; a trailing star is no nesting.
    #[test]
    fn more_than_a_thousand_nested_stars_match_nothing() {
        let text = "a".repeat(2000);
        let m = |p: String| glob_match(p.as_bytes(), text.as_bytes(), false);
        assert!(m("*?".repeat(1000)));
        assert!(m("*?".repeat(1000) + "*"));
        assert!(!m("*?".repeat(1001)));
        assert!(!m("*?".repeat(1001) + "*"));
        assert!(m("?*".repeat(1001)));
        assert!(!m("*?".repeat(50000)));
    }
}
