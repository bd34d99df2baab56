//! The manifest: the only source of truth for which log files make up the dataset.
//!
//! Format (Redis 7's): one line per file, `file <name> seq <n> type <b|i|h>`, base parts
//! first, then history files, then incremental files in order. History files (`h`) are
//! files a compaction made obsolete: listed so that deleting them is provably safe after a
//! crash (start-up deletes them), never loaded. The manifest is replaced atomically: write
//! a temp file, fsync, rename over the old one, fsync the directory.
//!
//! The parser follows Redis 7.0's (`aofLoadManifestFromFile`) on what is valid — lines of
//! at most 1024 bytes ending in a newline, `#` comments, key/value pairs with `file`,
//! `seq` and `type` required and other keys ignored, a file name and not a path — and is
//! stricter where Redis would load nonsense: a sequence number must be a positive decimal
//! below 2^63, a type exactly one of `b`, `i`, `h`, no name twice, bases of one sequence
//! number only (Tessera's base is one or more parts of one snapshot), and a manifest that
//! lists no base or incremental file is empty. It never panics, whatever the bytes.

use crate::storage::{CrashPoint, Storage};
use std::fmt;
use std::path::Path;

/// The longest line, newline included, that Redis 7.0 reads (`MANIFEST_MAX_LINE`).
pub const MAX_LINE_BYTES: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Base,
    Incremental,
    History,
}

impl FileKind {
    fn code(self) -> &'static str {
        match self {
            FileKind::Base => "b",
            FileKind::Incremental => "i",
            FileKind::History => "h",
        }
    }

    fn from_code(code: &str) -> Option<FileKind> {
        match code {
            "b" => Some(FileKind::Base),
            "i" => Some(FileKind::Incremental),
            "h" => Some(FileKind::History),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestEntry {
    pub name: String,
    pub seq: u64,
    pub kind: FileKind,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub entries: Vec<ManifestEntry>,
}

/// What is wrong with one line of a manifest that Redis would call "Invalid AOF manifest
/// file format".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineProblem {
    /// An empty line (Redis refuses them too).
    Blank,
    /// A NUL byte: Redis's C strings would end there, silently dropping the rest.
    NulByte,
    UnbalancedQuotes,
    /// Fewer than six words, or an odd number: not key/value pairs.
    NotPairs,
    /// One of `file`, `seq`, `type` is missing.
    Missing(&'static str),
    /// An empty file name, or one with a NUL byte.
    BadName,
    /// Not a decimal number from 1 to 2^63 - 1.
    BadSeq(String),
}

impl fmt::Display for LineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineProblem::Blank => write!(f, "an empty line"),
            LineProblem::NulByte => write!(f, "a NUL byte"),
            LineProblem::UnbalancedQuotes => write!(f, "unbalanced quotes"),
            LineProblem::NotPairs => {
                write!(f, "expected 'file <name> seq <n> type <b|i|h>'")
            }
            LineProblem::Missing(key) => write!(f, "no '{key}'"),
            LineProblem::BadName => write!(f, "an empty file name or one with a NUL byte"),
            LineProblem::BadSeq(value) => write!(
                f,
                "sequence number '{value}' is not a number from 1 to {}",
                i64::MAX
            ),
        }
    }
}

/// Why a manifest can't be used. Line numbers count from 1, comments included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManifestError {
    /// No bytes, or no base or incremental file listed (comments or history only).
    Empty,
    /// The last line has no newline: the file was cut short (Tessera always ends a line).
    Truncated {
        line: usize,
    },
    LineTooLong {
        line: usize,
    },
    NotUtf8 {
        line: usize,
    },
    Invalid {
        line: usize,
        problem: LineProblem,
    },
    /// The name is a path (`/`, `\`) or `.`/`..`: the manifest may only name files in
    /// its own directory.
    PathInName {
        line: usize,
        name: String,
    },
    UnknownType {
        line: usize,
        value: String,
    },
    /// Base files with two different sequence numbers: two snapshots claim the dataset.
    DuplicateBase {
        line: usize,
    },
    DuplicateName {
        line: usize,
        name: String,
    },
    /// An incremental file whose sequence number is not above the previous one's.
    NonMonotonic {
        line: usize,
        seq: u64,
    },
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Redis's wording first, so that its messages and ours can be searched alike.
        match self {
            ManifestError::Empty => write!(
                f,
                "Found an empty AOF manifest: it lists no base or incremental file"
            ),
            ManifestError::Truncated { line } => write!(
                f,
                "Invalid AOF manifest file format: line {line} has no end of line (the file was cut short)"
            ),
            ManifestError::LineTooLong { line } => write!(
                f,
                "The AOF manifest file contains too long line (line {line}, over {MAX_LINE_BYTES} bytes)"
            ),
            ManifestError::NotUtf8 { line } => write!(
                f,
                "Invalid AOF manifest file format at line {line}: not UTF-8 text"
            ),
            ManifestError::Invalid { line, problem } => {
                write!(
                    f,
                    "Invalid AOF manifest file format at line {line}: {problem}"
                )
            }
            ManifestError::PathInName { line, name } => write!(
                f,
                "File can't be a path, just a filename: '{}' at line {line}",
                name.escape_debug()
            ),
            ManifestError::UnknownType { line, value } => write!(
                f,
                "Unknown AOF file type '{}' at line {line}",
                value.escape_debug()
            ),
            ManifestError::DuplicateBase { line } => write!(
                f,
                "Found duplicate base file information at line {line}: base files of two sequence numbers"
            ),
            ManifestError::DuplicateName { line, name } => write!(
                f,
                "The file '{}' is listed twice (line {line})",
                name.escape_debug()
            ),
            ManifestError::NonMonotonic { line, seq } => write!(
                f,
                "Found a non-monotonic sequence number at line {line}: incremental file seq {seq}"
            ),
        }
    }
}

impl std::error::Error for ManifestError {}

impl Manifest {
    /// Parses a manifest's bytes. Any byte sequence gives a manifest or an error.
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let mut entries: Vec<ManifestEntry> = Vec::new();
        let mut names = std::collections::HashSet::new();
        let mut base_seq = None;
        let mut last_incremental = 0;
        let mut rest = bytes;
        let mut line = 0;
        while !rest.is_empty() {
            line += 1;
            let (text, ended) = match rest.iter().position(|&b| b == b'\n') {
                Some(end) => (&rest[..end], true),
                None => (rest, false),
            };
            rest = &rest[(text.len() + 1).min(rest.len())..];
            if text.len() + 1 > MAX_LINE_BYTES {
                return Err(ManifestError::LineTooLong { line });
            }
            if text.first() == Some(&b'#') {
                continue; // A comment, as in Redis (even without a final newline).
            }
            if !ended {
                return Err(ManifestError::Truncated { line });
            }
            let entry = parse_line(text, line)?;
            if !names.insert(entry.name.clone()) {
                return Err(ManifestError::DuplicateName {
                    line,
                    name: entry.name,
                });
            }
            match entry.kind {
                FileKind::Base if *base_seq.get_or_insert(entry.seq) != entry.seq => {
                    return Err(ManifestError::DuplicateBase { line });
                }
                FileKind::Incremental if entry.seq <= last_incremental => {
                    return Err(ManifestError::NonMonotonic {
                        line,
                        seq: entry.seq,
                    });
                }
                FileKind::Incremental => last_incremental = entry.seq,
                FileKind::Base | FileKind::History => {}
            }
            entries.push(entry);
        }
        let manifest = Manifest { entries };
        if manifest.base().next().is_none() && manifest.last_incremental().is_none() {
            return Err(ManifestError::Empty);
        }
        Ok(manifest)
    }

    /// The manifest's text. Names that `parse` would not read back as one word are quoted
    /// with escapes, as Redis's `sdscatrepr` does.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for entry in &self.entries {
            text.push_str("file ");
            push_name(&mut text, &entry.name);
            text.push_str(&format!(" seq {} type {}\n", entry.seq, entry.kind.code()));
        }
        text
    }

    pub fn incremental(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.of_kind(FileKind::Incremental)
    }

    pub fn base(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.of_kind(FileKind::Base)
    }

    pub fn history(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.of_kind(FileKind::History)
    }

    fn of_kind(&self, kind: FileKind) -> impl Iterator<Item = &ManifestEntry> {
        self.entries.iter().filter(move |e| e.kind == kind)
    }

    pub fn last_incremental(&self) -> Option<&ManifestEntry> {
        self.incremental().last()
    }

    /// The same manifest once its history files are deleted.
    pub fn without_history(&self) -> Manifest {
        Manifest {
            entries: self
                .entries
                .iter()
                .filter(|e| e.kind != FileKind::History)
                .cloned()
                .collect(),
        }
    }

    /// Writes the manifest atomically: temp file, fsync, rename, fsync of the directory.
    pub fn commit(
        &self,
        storage: &dyn Storage,
        dir: &Path,
        file_name: &str,
    ) -> Result<(), CommitError> {
        let temp = dir.join(format!("temp-{file_name}"));
        let write = || -> std::io::Result<()> {
            let mut file = storage.create(&temp)?;
            file.append(self.to_text().as_bytes())?;
            file.sync_all()?;
            storage.checkpoint(CrashPoint::ManifestTempWritten);
            storage.rename(&temp, &dir.join(file_name))
        };
        write().map_err(|e| {
            // Not committed: the temp file is garbage (start-up would remove it too).
            let _ = storage.remove_file(&temp);
            CommitError::NotCommitted(e)
        })?;
        storage.checkpoint(CrashPoint::ManifestRenamed);
        storage.sync_dir(dir).map_err(CommitError::NotDurable)
    }
}

/// One line that is not a comment, without its newline.
fn parse_line(text: &[u8], line: usize) -> Result<ManifestEntry, ManifestError> {
    let invalid = |problem| ManifestError::Invalid { line, problem };
    let text = text.trim_ascii_start();
    let text = &text[..text.len() - trailing_blanks(text)];
    if text.is_empty() {
        return Err(invalid(LineProblem::Blank));
    }
    if text.contains(&0) {
        return Err(invalid(LineProblem::NulByte));
    }
    if std::str::from_utf8(text).is_err() {
        return Err(ManifestError::NotUtf8 { line });
    }
    let words = crate::resp::split_args(text).ok_or(invalid(LineProblem::UnbalancedQuotes))?;
    // At least the three pairs; more pairs are keys of a later version, ignored (Redis).
    if words.len() < 6 || words.len() % 2 == 1 {
        return Err(invalid(LineProblem::NotPairs));
    }
    let (mut name, mut seq, mut kind) = (None, None, None);
    for pair in words.chunks_exact(2) {
        let (key, value) = (&pair[0], &pair[1]);
        if key.eq_ignore_ascii_case(b"file") {
            name = Some(value);
        } else if key.eq_ignore_ascii_case(b"seq") {
            seq = Some(value);
        } else if key.eq_ignore_ascii_case(b"type") {
            kind = Some(value);
        }
    }
    let name = name.ok_or(invalid(LineProblem::Missing("file")))?;
    let seq = seq.ok_or(invalid(LineProblem::Missing("seq")))?;
    let kind = kind.ok_or(invalid(LineProblem::Missing("type")))?;
    // Escapes in quotes can make any byte: check the name again.
    let name = String::from_utf8(name.clone()).map_err(|_| ManifestError::NotUtf8 { line })?;
    if name.is_empty() || name.contains('\0') {
        return Err(invalid(LineProblem::BadName));
    }
    if name.contains(['/', '\\']) || name == "." || name == ".." {
        return Err(ManifestError::PathInName { line, name });
    }
    let seq_text = String::from_utf8_lossy(seq);
    let seq = parse_seq(seq).ok_or_else(|| invalid(LineProblem::BadSeq(seq_text.into())))?;
    let kind = std::str::from_utf8(kind)
        .ok()
        .and_then(FileKind::from_code)
        .ok_or_else(|| ManifestError::UnknownType {
            line,
            value: String::from_utf8_lossy(kind).into(),
        })?;
    Ok(ManifestEntry { name, seq, kind })
}

/// Spaces, tabs and carriage returns at the end (Redis trims " \t\r\n").
fn trailing_blanks(text: &[u8]) -> usize {
    text.iter()
        .rev()
        .take_while(|&&b| matches!(b, b' ' | b'\t' | b'\r'))
        .count()
}

/// 1 to 2^63 - 1 in decimal: what Redis's `long long` sequence numbers can hold, so that
/// the next number (`seq + 1`) never overflows.
fn parse_seq(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 19 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let seq: u64 = std::str::from_utf8(text).ok()?.parse().ok()?;
    (1..=i64::MAX as u64).contains(&seq).then_some(seq)
}

fn push_name(text: &mut String, name: &str) {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'\\'));
    if plain {
        text.push_str(name);
        return;
    }
    let mut quoted = Vec::with_capacity(name.len() + 2);
    crate::monitor::push_repr(&mut quoted, name.as_bytes());
    text.push_str(&String::from_utf8_lossy(&quoted));
}

/// How a manifest commit failed.
#[derive(Debug)]
pub enum CommitError {
    /// Before the rename: the previous manifest is still the one in force.
    NotCommitted(std::io::Error),
    /// The rename was done but the directory fsync failed: the new manifest is the one in
    /// force for this process and after a restart, but a power loss may bring back the
    /// previous one. Everything both of them list must be kept until a directory fsync
    /// succeeds.
    NotDurable(std::io::Error),
}

impl std::fmt::Display for CommitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommitError::NotCommitted(e) => write!(f, "{e}"),
            CommitError::NotDurable(e) => write!(f, "directory fsync after the rename: {e}"),
        }
    }
}

impl std::error::Error for CommitError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CommitError::NotCommitted(e) | CommitError::NotDurable(e) => Some(e),
        }
    }
}

impl From<CommitError> for std::io::Error {
    fn from(error: CommitError) -> std::io::Error {
        match error {
            CommitError::NotCommitted(e) | CommitError::NotDurable(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text.as_bytes())
    }

    fn line_problem(text: &str) -> LineProblem {
        match parse(text) {
            Err(ManifestError::Invalid { problem, .. }) => problem,
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn round_trip_and_redis_format() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let manifest = parse(text).unwrap();
        assert_eq!(manifest.entries.len(), 3);
        assert_eq!(manifest.base().count(), 1);
        assert_eq!(manifest.last_incremental().unwrap().seq, 2);
        assert_eq!(manifest.to_text(), text);
    }

    #[test]
    fn reads_what_redis_writes_and_accepts() {
        // The example of Redis 7.0's aof.c, with a comment, CRLF, upper-case keys and a
        // key of a later version (ignored).
        let text = "# written by hand\nfile appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.1.incr.aof seq 1 type h\nfile appendonly.aof.2.incr.aof seq 2 type h\r\nFILE appendonly.aof.4.incr.aof SEQ 4 TYPE i\nfile appendonly.aof.5.incr.aof seq 5 type i startoffset 42\n";
        let manifest = parse(text).unwrap();
        assert_eq!(manifest.history().count(), 2);
        assert_eq!(manifest.incremental().count(), 2);
        assert_eq!(
            manifest.without_history().to_text(),
            "file appendonly.aof.2.base.rdb seq 2 type b\nfile appendonly.aof.4.incr.aof seq 4 type i\nfile appendonly.aof.5.incr.aof seq 5 type i\n"
        );
        // Base parts share one sequence number.
        let parts = "file a.3.base.1.rdb seq 3 type b\nfile a.3.base.2.rdb seq 3 type b\nfile a.7.incr.aof seq 7 type i\n";
        assert_eq!(parse(parts).unwrap().base().count(), 2);
        // A base alone is a dataset (Redis adds an incremental file when it starts).
        assert!(parse("file a.1.base.rdb seq 1 type b\n").is_ok());
    }

    #[test]
    fn empty_manifests() {
        assert_eq!(parse(""), Err(ManifestError::Empty));
        assert_eq!(
            parse("# only a comment\n#another"),
            Err(ManifestError::Empty)
        );
        assert_eq!(
            parse("file a.1.incr.aof seq 1 type h\n"),
            Err(ManifestError::Empty)
        );
    }

    #[test]
    fn truncated_and_overlong_lines() {
        let text = "file a.1.base.rdb seq 1 type b\nfile a.1.incr.aof seq 1 type i\n";
        for cut in 1..text.len() - 1 {
            let result = Manifest::parse(&text.as_bytes()[..cut]);
            if text.as_bytes()[cut - 1] != b'\n' {
                assert!(
                    matches!(result, Err(ManifestError::Truncated { .. })),
                    "cut at {cut}: {result:?}"
                );
            }
        }
        let name = "n".repeat(MAX_LINE_BYTES - "file  seq 1 type i\n".len());
        assert!(parse(&format!("file {name} seq 1 type i\n")).is_ok());
        assert_eq!(
            parse(&format!("file {name}x seq 1 type i\n")),
            Err(ManifestError::LineTooLong { line: 1 })
        );
        assert_eq!(
            parse(&format!("#{}\n", "c".repeat(MAX_LINE_BYTES))),
            Err(ManifestError::LineTooLong { line: 1 })
        );
    }

    #[test]
    fn invalid_lines() {
        assert_eq!(line_problem("\n"), LineProblem::Blank);
        assert_eq!(line_problem(" \t\r\n"), LineProblem::Blank);
        assert_eq!(line_problem("file x seq 1\n"), LineProblem::NotPairs);
        assert_eq!(line_problem("file x seq 1 type\n"), LineProblem::NotPairs);
        assert_eq!(
            line_problem("file x seq 1 kind i\n"),
            LineProblem::Missing("type")
        );
        assert_eq!(
            line_problem("name x seq 1 type i\n"),
            LineProblem::Missing("file")
        );
        assert_eq!(
            line_problem("file \"x seq 1 type i\n"),
            LineProblem::UnbalancedQuotes
        );
        assert_eq!(
            line_problem("file x\0 seq 1 type i\n"),
            LineProblem::NulByte
        );
        assert_eq!(
            line_problem("file \"\" seq 1 type i\n"),
            LineProblem::BadName
        );
        assert_eq!(
            line_problem("file \"a\\x00\" seq 1 type i\n"),
            LineProblem::BadName
        );
        for seq in ["0", "-1", "+1", "1x", "0x10", " ", "9223372036854775808"] {
            assert_eq!(
                line_problem(&format!("file x seq \"{seq}\" type i\n")),
                LineProblem::BadSeq(seq.into()),
                "{seq}"
            );
        }
        assert_eq!(
            line_problem("file x seq 99999999999999999999999999 type i\n"),
            LineProblem::BadSeq("99999999999999999999999999".into())
        );
        let top = parse("file x seq 9223372036854775807 type i\n").unwrap();
        assert_eq!(top.entries[0].seq, i64::MAX as u64);
        assert_eq!(
            Manifest::parse(b"file \xff\xfe seq 1 type i\n"),
            Err(ManifestError::NotUtf8 { line: 1 })
        );
        assert_eq!(
            parse("file \"\\xff\" seq 1 type i\n"),
            Err(ManifestError::NotUtf8 { line: 1 })
        );
        for value in ["x", "base", "B", "\"\""] {
            assert!(
                matches!(
                    parse(&format!("file a seq 1 type {value}\n")),
                    Err(ManifestError::UnknownType { line: 1, .. })
                ),
                "{value}"
            );
        }
    }

    #[test]
    fn names_are_file_names_in_the_directory() {
        for name in ["../x", "a/b", "/etc/passwd", "..", ".", "a\\b", "\"..\""] {
            assert!(
                matches!(
                    parse(&format!("file {name} seq 1 type i\n")),
                    Err(ManifestError::PathInName { line: 1, .. })
                ),
                "{name}"
            );
        }
        // Names with spaces or odd bytes survive a round trip, quoted as Redis does.
        for name in [
            "my log.1.incr.aof",
            "quote\"s",
            "tab\tnew\nline",
            "é",
            "it's",
        ] {
            let manifest = Manifest {
                entries: vec![ManifestEntry {
                    name: name.into(),
                    seq: 1,
                    kind: FileKind::Incremental,
                }],
            };
            assert_eq!(
                Manifest::parse(manifest.to_text().as_bytes()),
                Ok(manifest.clone()),
                "{}",
                manifest.to_text()
            );
        }
    }

    #[test]
    fn duplicates_and_order() {
        assert_eq!(
            parse("file a seq 1 type i\nfile a seq 2 type i\n"),
            Err(ManifestError::DuplicateName {
                line: 2,
                name: "a".into()
            })
        );
        assert_eq!(
            parse("file a seq 1 type b\nfile a seq 1 type h\n"),
            Err(ManifestError::DuplicateName {
                line: 2,
                name: "a".into()
            })
        );
        assert_eq!(
            parse("file a seq 1 type b\nfile b seq 2 type b\nfile c seq 1 type i\n"),
            Err(ManifestError::DuplicateBase { line: 2 })
        );
        assert_eq!(
            parse("file a seq 2 type i\nfile b seq 1 type i\n"),
            Err(ManifestError::NonMonotonic { line: 2, seq: 1 })
        );
        assert_eq!(
            parse("file a seq 2 type i\nfile b seq 2 type i\n"),
            Err(ManifestError::NonMonotonic { line: 2, seq: 2 })
        );
    }

    // -----------------------------------------------------------------------------------
    // Fuzzing, as the RESP parser is fuzzed: seeded random input must never panic, and
    // whatever parses must satisfy the invariants the rest of the server relies on.

    /// What every accepted manifest guarantees, and that its text reads back the same.
    fn check_invariants(manifest: &Manifest, input: &[u8]) {
        let context = String::from_utf8_lossy(input);
        assert!(
            manifest.base().next().is_some() || manifest.last_incremental().is_some(),
            "{context:?}"
        );
        let mut names = std::collections::HashSet::new();
        for entry in &manifest.entries {
            assert!(names.insert(&entry.name), "{context:?}");
            assert!(!entry.name.is_empty() && !entry.name.contains(['/', '\\', '\0']));
            assert!(entry.name != "." && entry.name != "..");
            assert!(
                entry.seq >= 1 && entry.seq <= i64::MAX as u64,
                "{context:?}"
            );
        }
        let incremental: Vec<u64> = manifest.incremental().map(|e| e.seq).collect();
        assert!(incremental.windows(2).all(|w| w[0] < w[1]), "{context:?}");
        let bases: std::collections::HashSet<u64> = manifest.base().map(|e| e.seq).collect();
        assert!(bases.len() <= 1, "{context:?}");
        assert_eq!(
            Manifest::parse(manifest.to_text().as_bytes()).as_ref(),
            Ok(manifest),
            "{context:?}"
        );
    }

    /// Parses `input`; checks the invariants if it is accepted. Returns whether it was.
    fn fuzz_one(input: &[u8]) -> bool {
        match Manifest::parse(input) {
            Ok(manifest) => {
                check_invariants(&manifest, input);
                true
            }
            // Every error has a message.
            Err(error) => {
                assert!(!error.to_string().is_empty());
                false
            }
        }
    }

    const WORDS: &[&str] = &[
        "file",
        "seq",
        "type",
        "b",
        "i",
        "h",
        "FILE",
        "x",
        "..",
        "/",
        "\\",
        "\"",
        "'",
        "#",
        "\n",
        "\r\n",
        " ",
        "\t",
        "\\x41",
        "\\xff",
        "0",
        "1",
        "2",
        "-1",
        "18446744073709551616",
        "9223372036854775807",
        "appendonly.aof.1.incr.aof",
        "appendonly.aof.2.base.rdb",
        "\0",
        "é",
    ];

    #[test]
    fn random_bytes_never_panic_the_parser() {
        use rand::{RngExt, SeedableRng};
        let mut accepted = 0;
        for seed in 0..3000u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let len = rng.random_range(0..300usize);
            let input: Vec<u8> = match seed % 3 {
                // Any bytes at all.
                0 => (0..len).map(|_| rng.random()).collect(),
                // Lines of the right shape, with values often wrong.
                1 => {
                    let mut text = String::new();
                    for _ in 0..rng.random_range(1..5) {
                        let pick = |rng: &mut rand::rngs::StdRng, good: &str| {
                            if rng.random_bool(0.8) {
                                good.to_string()
                            } else {
                                WORDS[rng.random_range(0..WORDS.len())].to_string()
                            }
                        };
                        let seq = rng.random_range(1..6u64).to_string();
                        let name = format!("f{}", rng.random_range(0..6u32));
                        let kind = ["b", "i", "h"][rng.random_range(0..3usize)];
                        text.push_str(&format!(
                            "file {} seq {} type {}\n",
                            pick(&mut rng, &name),
                            pick(&mut rng, &seq),
                            pick(&mut rng, kind)
                        ));
                    }
                    text.into_bytes()
                }
                // The manifest's own vocabulary, in random order.
                _ => {
                    let mut text = Vec::new();
                    while text.len() < len {
                        text.extend_from_slice(WORDS[rng.random_range(0..WORDS.len())].as_bytes());
                        if rng.random_bool(0.6) {
                            text.push(b' ');
                        }
                    }
                    text
                }
            };
            accepted += usize::from(fuzz_one(&input));
        }
        // Both outcomes are exercised.
        eprintln!("{accepted} of 3000 random inputs accepted");
        assert!(accepted > 100 && accepted < 2900, "{accepted} accepted");
        // Lines around the length limit.
        for len in MAX_LINE_BYTES - 30..MAX_LINE_BYTES + 3 {
            let name = "n".repeat(len.saturating_sub("file  seq 1 type i".len()));
            fuzz_one(format!("file {name} seq 1 type i\n").as_bytes());
            fuzz_one(format!("file {name} seq 1 type i").as_bytes());
        }
    }

    /// A valid manifest of the shape compactions write: parts, history, incremental files.
    fn valid_manifest(rng: &mut rand::rngs::StdRng) -> Manifest {
        use rand::RngExt;
        let mut entries = Vec::new();
        let base = rng.random_range(0..5u64);
        let parts = rng.random_range(1..5usize);
        if base > 0 {
            for part in 1..=parts {
                entries.push(ManifestEntry {
                    name: format!("appendonly.aof.{base}.base.{part}.rdb"),
                    seq: base,
                    kind: FileKind::Base,
                });
            }
        }
        let first = rng.random_range(1..10u64);
        let history = rng.random_range(0..3u64);
        for seq in first..first + history {
            entries.push(ManifestEntry {
                name: format!("appendonly.aof.{seq}.incr.aof"),
                seq,
                kind: FileKind::History,
            });
        }
        for seq in first + history..first + history + rng.random_range(1..4u64) {
            entries.push(ManifestEntry {
                name: format!("appendonly.aof.{seq}.incr.aof"),
                seq,
                kind: FileKind::Incremental,
            });
        }
        Manifest { entries }
    }

    #[test]
    fn mutated_valid_manifests_never_panic_the_parser() {
        use rand::{RngExt, SeedableRng};
        let mut accepted = 0;
        for seed in 0..3000u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let manifest = valid_manifest(&mut rng);
            let text = manifest.to_text().into_bytes();
            assert_eq!(Manifest::parse(&text), Ok(manifest.clone()));
            let mut input = text.clone();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(0..=input.len());
                match rng.random_range(0..8u32) {
                    0 if at < input.len() => input[at] = rng.random(),
                    1 => input.insert(at, rng.random()),
                    2 => input.truncate(at),
                    3 => {
                        let end = rng.random_range(at..=input.len());
                        input.drain(at..end);
                    }
                    4 => {
                        let word = WORDS[rng.random_range(0..WORDS.len())].as_bytes();
                        input.splice(at..at, word.iter().copied());
                    }
                    5 => {
                        // A line twice, or the lines in another order.
                        let mut lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
                        let i = rng.random_range(0..lines.len());
                        if rng.random_bool(0.5) {
                            lines.insert(rng.random_range(0..=lines.len()), lines[i]);
                        } else {
                            let j = rng.random_range(0..lines.len());
                            lines.swap(i, j);
                        }
                        input = lines.concat();
                    }
                    6 => {
                        // A number made huge, zero or negative.
                        let huge = ["99999999999999999999", "0", "-3", "9223372036854775808"]
                            [rng.random_range(0..4usize)];
                        let text = String::from_utf8_lossy(&input).replacen(
                            " seq ",
                            &format!(" seq {huge}"),
                            1,
                        );
                        input = text.into_bytes();
                    }
                    _ => {
                        let text = String::from_utf8_lossy(&input).replacen("appendonly", "../", 1);
                        input = text.into_bytes();
                    }
                }
            }
            accepted += usize::from(fuzz_one(&input));
        }
        // Both outcomes are exercised: mutations that keep a manifest valid, and errors.
        eprintln!("{accepted} of 3000 mutated manifests accepted");
        assert!(accepted > 100 && accepted < 2900, "{accepted} accepted");
    }
}
