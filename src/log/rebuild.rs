//! Rebuilding a lost or damaged manifest from the files of a log directory
//! (`tessera-check-aof --rebuild-manifest`). Reads only; the caller writes the result.
//!
//! The base is the complete set of parts with the highest sequence number. A set is
//! complete when every part is a valid RDB file (header, every record, CRC64) and the
//! parts hold every slot: parts written by this version record their number, the part
//! count, their slot range and the first incremental file after them (aux fields, see
//! `log::AUX_*`), so the count and the ranges are checked against the names.
//! Parts written before that are numbered 1..m with no gap, and each key is checked to lie
//! in the slots part i owns when there are m parts (a missing last part usually shows as
//! keys out of range, but not always: the decision says so).
//!
//! The incremental files listed are those from the first one after the base on, with no
//! gap (incremental sequence numbers are a counter of their own: a compaction's rotation
//! takes the next one, and later files follow it one by one). The first one is the part's
//! `tessera-first-incr` field; for older parts it is the lowest incremental file present,
//! which is right unless the files a compaction made obsolete were not all deleted — when
//! an older base is still there, that can't be told, and `--first-incr` must say it. Each
//! listed file must parse (`log::scan::scan_records`); the last may end damaged, which
//! `tessera-check-aof --fix` repairs once the manifest exists.

use super::manifest::{FileKind, Manifest, ManifestEntry};
use super::scan::LogDamage;
use super::{AUX_FIRST_INCR, AUX_PART, AUX_PARTS, AUX_SLOTS};
use super::{BasePart, LogFileName, LogPaths};
use crate::keyspace::{Entry, SLOT_COUNT, key_slot};
use crate::storage::{Storage, StorageReader};
use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// What the rebuild does with one file of the directory, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileDecision {
    pub name: String,
    /// How the new manifest lists it, if it does.
    pub listed: Option<FileKind>,
    pub reason: String,
}

/// Why no manifest can be rebuilt. The decisions made so far are in `Rebuild`.
#[derive(Debug)]
pub enum RebuildError {
    /// The directory can't be listed.
    ListDir { dir: PathBuf, error: std::io::Error },
    /// No base or incremental file of the log in the directory.
    NoLogFiles,
    /// More than one file-name prefix: `--appendfilename` must say which log.
    SeveralLogs(Vec<String>),
    /// A base written before parts recorded their first incremental file, with older
    /// files present: which incremental files follow it can't be told.
    Ambiguous { base: u64 },
    /// The incremental files after the base have a gap (or do not start where the base
    /// says): records are missing.
    Missing { seq: u64 },
    /// No complete base, and the incremental files do not start at 1.
    NoStart { first_present: u64 },
    /// An incremental file other than the last is damaged: those after it can't be used.
    Damaged { name: String, damage: LogDamage },
}

impl fmt::Display for RebuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RebuildError::ListDir { dir, error } => {
                write!(f, "can't list {}: {error}", dir.display())
            }
            RebuildError::NoLogFiles => write!(f, "the directory holds no log file"),
            RebuildError::SeveralLogs(names) => write!(
                f,
                "files of several logs are here ({}): say which with --appendfilename",
                names.join(", ")
            ),
            RebuildError::Ambiguous { base } => write!(
                f,
                "base {base} does not record which incremental file follows it (written by an \
                 older version) and older files are still present, so where its incremental \
                 files begin can't be told; give it with --first-incr <seq> (the incremental \
                 file created when that compaction started)"
            ),
            RebuildError::Missing { seq } => write!(
                f,
                "incremental file {seq} is missing: the records in it are lost; restore it from \
                 a backup (or, accepting the loss, give --first-incr after it)"
            ),
            RebuildError::NoStart { first_present } => write!(
                f,
                "no complete base, and the first incremental file is {first_present}, not 1: \
                 the records before it are missing (give --first-incr {first_present} to accept \
                 the loss)"
            ),
            RebuildError::Damaged { name, damage } => write!(
                f,
                "{name} is damaged ({damage}) and is not the last incremental file; restore it \
                 from a backup"
            ),
        }
    }
}

impl std::error::Error for RebuildError {}

/// Why a base part can't be used (after its name, in the reason of a decision).
#[derive(Debug, thiserror::Error)]
enum PartError {
    #[error("can't open it: {0}")]
    Open(#[source] std::io::Error),
    #[error("not a valid RDB file: {0}")]
    NotRdb(#[source] crate::rdb::RdbError),
    #[error("it records only some of its tessera-* aux fields")]
    SomeHints,
    #[error("aux field {field} '{value}' is not valid")]
    BadHint { field: &'static str, value: String },
}

/// Why the files of a base are not one complete snapshot (in the reason of a decision).
#[derive(Debug, thiserror::Error)]
enum IncompleteBase {
    #[error(
        "a base in RESP form (aof-use-rdb-preamble no): it records no place in the log, so the rebuild does not use it"
    )]
    RespForm,
    #[error("both a single-part name and numbered parts")]
    MixedNames,
    #[error("only one of its numbered parts is present")]
    LoneNumberedPart,
    #[error("part {0} is missing")]
    PartMissing(usize),
    #[error("{name}: {source}")]
    BadPart { name: String, source: PartError },
    /// A part written before parts recorded their place holds keys outside the slots it
    /// would own in a set of `count`.
    #[error(
        "part {part} holds keys outside the slots it would own in a set of {count} \
         (a part after it is missing)"
    )]
    KeysOutsideImpliedSlots { part: usize, count: usize },
    #[error("some parts record their place and some do not")]
    SomeUnrecorded,
    #[error("{present} of its {parts} parts are present")]
    PartsMissing { present: usize, parts: usize },
    #[error("{name} records that it is part {part} of {parts}")]
    WrongPlace {
        name: String,
        part: usize,
        parts: usize,
    },
    #[error("slots from {0} are in no part")]
    SlotsUncovered(usize),
    #[error("{0} holds keys outside its slots")]
    KeysOutsideSlots(String),
    #[error("its parts disagree on the incremental file after them")]
    FirstIncrDisagrees,
}

/// The outcome of a rebuild: a decision for every file, and the manifest or the reason
/// there is none.
#[derive(Debug)]
pub struct Rebuild {
    pub decisions: Vec<FileDecision>,
    pub result: Result<Manifest, RebuildError>,
}

/// What the files of a directory say the log's `appendfilename` is: the manifest's
/// prefix, or the only prefix of base and incremental names; `appendonly.aof` if none.
pub fn infer_base_name(names: &[String]) -> Result<String, RebuildError> {
    if let Some(manifest) = names.iter().find_map(|n| {
        n.strip_suffix(".manifest")
            .filter(|p| !p.starts_with("temp-"))
    }) {
        return Ok(manifest.to_string());
    }
    let mut prefixes: Vec<String> = names
        .iter()
        .filter_map(|name| {
            let stem = name
                .strip_suffix(".incr.aof")
                .or_else(|| name.split_once(".base.").map(|(stem, _)| stem))?;
            let (prefix, seq) = stem.rsplit_once('.')?;
            let paths = LogPaths {
                dir: Default::default(),
                base_name: prefix.to_string(),
            };
            (!seq.is_empty() && paths.parse_file_name(name).is_some()).then(|| prefix.to_string())
        })
        .collect();
    prefixes.sort();
    prefixes.dedup();
    match prefixes.len() {
        0 => Ok("appendonly.aof".into()),
        1 => Ok(prefixes.remove(0)),
        _ => Err(RebuildError::SeveralLogs(prefixes)),
    }
}

/// The hints a part written by this version records.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PartHints {
    part: usize,
    parts: usize,
    slots: RangeInclusive<usize>,
    first_incr: u64,
}

/// What reading one part found.
struct PartRead {
    hints: Option<PartHints>,
    keys: u64,
    /// The lowest and highest slot of its keys; None when it has none.
    slots_used: Option<(usize, usize)>,
}

/// Reads a whole RDB part: header, every record, the CRC64; gathers its hints and the
/// slots of its keys.
fn read_part(storage: &dyn Storage, paths: &LogPaths, name: &str) -> Result<PartRead, PartError> {
    #[derive(Default)]
    struct Visitor {
        aux: BTreeMap<String, String>,
        keys: u64,
        slots_used: Option<(usize, usize)>,
    }
    impl crate::rdb::RdbVisitor for Visitor {
        fn entry(&mut self, _db: u32, entry: Entry) -> Result<(), crate::rdb::Refusal> {
            let slot = key_slot(&entry.key);
            self.keys += 1;
            let (low, high) = self.slots_used.get_or_insert((slot, slot));
            *low = (*low).min(slot);
            *high = (*high).max(slot);
            Ok(())
        }
        fn aux(&mut self, key: &[u8], value: &[u8]) -> Result<(), crate::rdb::Refusal> {
            self.aux.insert(
                String::from_utf8_lossy(key).into(),
                String::from_utf8_lossy(value).into(),
            );
            Ok(())
        }
    }
    let file = storage
        .open_read(&paths.file(name))
        .map_err(PartError::Open)?;
    let reader = std::io::BufReader::with_capacity(1 << 20, StorageReader::new(file));
    let mut visitor = Visitor::default();
    crate::rdb::load(reader, &mut visitor).map_err(PartError::NotRdb)?;
    let hints = hints_of(&visitor.aux)?;
    Ok(PartRead {
        hints,
        keys: visitor.keys,
        slots_used: visitor.slots_used,
    })
}

/// None when the part records none of the hints; an error when it records some, or
/// nonsense.
fn hints_of(aux: &BTreeMap<String, String>) -> Result<Option<PartHints>, PartError> {
    let fields = [AUX_PART, AUX_PARTS, AUX_SLOTS, AUX_FIRST_INCR].map(|key| aux.get(key));
    let [Some(part), Some(parts), Some(slots), Some(first_incr)] = fields else {
        if fields.iter().any(Option::is_some) {
            return Err(PartError::SomeHints);
        }
        return Ok(None);
    };
    let bad = |field: &'static str, value: &str| PartError::BadHint {
        field,
        value: value.to_string(),
    };
    let number =
        |field: &'static str, value: &str| value.parse::<u64>().map_err(|_| bad(field, value));
    let part = number(AUX_PART, part)? as usize;
    let parts = number(AUX_PARTS, parts)? as usize;
    let (first, last) = slots.split_once('-').ok_or_else(|| bad(AUX_SLOTS, slots))?;
    let (first, last) = (number(AUX_SLOTS, first)?, number(AUX_SLOTS, last)?);
    if part == 0 || part > parts || parts > SLOT_COUNT || first > last || last >= SLOT_COUNT as u64
    {
        return Err(bad(AUX_SLOTS, slots));
    }
    Ok(Some(PartHints {
        part,
        parts,
        slots: first as usize..=last as usize,
        first_incr: number(AUX_FIRST_INCR, first_incr)?,
    }))
}

/// Where the first incremental file after the base comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FirstIncr {
    /// `--first-incr`.
    Given,
    /// The base's parts record it.
    Recorded,
    /// An older base's parts: every incremental file present.
    AllPresent,
    /// No base: the log's first file.
    FromOne,
}

/// A complete base: its parts in part order (name, keys), and the first incremental
/// file after it when the parts record it.
struct BaseSet {
    parts: Vec<(String, u64)>,
    first_incr: Option<u64>,
}

/// Checks that the files of base `seq` are one complete snapshot. The error says why not.
fn check_base_set(
    storage: &dyn Storage,
    paths: &LogPaths,
    mut files: Vec<(BasePart, String)>,
) -> Result<BaseSet, IncompleteBase> {
    files.sort();
    if files.iter().any(|(part, _)| *part == BasePart::Resp) {
        return Err(IncompleteBase::RespForm);
    }
    if files.iter().any(|(part, _)| *part == BasePart::Only) && files.len() > 1 {
        return Err(IncompleteBase::MixedNames);
    }
    let numbered = files
        .iter()
        .any(|(part, _)| matches!(part, BasePart::Numbered(_)));
    let count = files.len();
    if numbered && count == 1 {
        // A snapshot in one part is named `<seq>.base.rdb`: a lone numbered part is what
        // is left of several.
        return Err(IncompleteBase::LoneNumberedPart);
    }
    let mut reads = Vec::new();
    for (index, (part, name)) in files.iter().enumerate() {
        if numbered && *part != BasePart::Numbered(index + 1) {
            return Err(IncompleteBase::PartMissing(index + 1));
        }
        let read = read_part(storage, paths, name).map_err(|source| IncompleteBase::BadPart {
            name: name.clone(),
            source,
        })?;
        reads.push(read);
    }
    let hinted = reads.iter().filter(|r| r.hints.is_some()).count();
    let first_incr = if hinted == 0 {
        // An older part: the names are the only record of the count; the keys must at
        // least lie where `count` parts would put them.
        for (index, read) in reads.iter().enumerate() {
            let owned = crate::snapshot::part_slots(index, count);
            if let Some((low, high)) = read.slots_used
                && (low < *owned.start() || high > *owned.end())
            {
                return Err(IncompleteBase::KeysOutsideImpliedSlots {
                    part: index + 1,
                    count,
                });
            }
        }
        None
    } else if hinted < count {
        return Err(IncompleteBase::SomeUnrecorded);
    } else {
        let hints: Vec<&PartHints> = reads.iter().filter_map(|r| r.hints.as_ref()).collect();
        let parts = hints[0].parts;
        if parts != count {
            return Err(IncompleteBase::PartsMissing {
                present: count,
                parts,
            });
        }
        let mut next = 0;
        for (index, (hint, read)) in hints.iter().zip(&reads).enumerate() {
            if hint.part != index + 1 || hint.parts != parts {
                return Err(IncompleteBase::WrongPlace {
                    name: files[index].1.clone(),
                    part: hint.part,
                    parts: hint.parts,
                });
            }
            if *hint.slots.start() != next {
                return Err(IncompleteBase::SlotsUncovered(next));
            }
            next = hint.slots.end() + 1;
            if let Some((low, high)) = read.slots_used
                && (low < *hint.slots.start() || high > *hint.slots.end())
            {
                return Err(IncompleteBase::KeysOutsideSlots(files[index].1.clone()));
            }
            if hint.first_incr != hints[0].first_incr {
                return Err(IncompleteBase::FirstIncrDisagrees);
            }
        }
        if next != SLOT_COUNT {
            return Err(IncompleteBase::SlotsUncovered(next));
        }
        Some(hints[0].first_incr)
    };
    Ok(BaseSet {
        parts: files
            .into_iter()
            .zip(&reads)
            .map(|((_, name), read)| (name, read.keys))
            .collect(),
        first_incr,
    })
}

/// Decides the manifest of the log `paths` from the files in its directory.
/// `first_incr` overrides the first incremental file after the base (`--first-incr`).
pub fn rebuild(storage: &dyn Storage, paths: &LogPaths, first_incr: Option<u64>) -> Rebuild {
    let mut decisions = Vec::new();
    let result = decide(storage, paths, first_incr, &mut decisions);
    decisions.sort_by(|a, b| a.name.cmp(&b.name));
    Rebuild { decisions, result }
}

fn decide(
    storage: &dyn Storage,
    paths: &LogPaths,
    first_incr_given: Option<u64>,
    decisions: &mut Vec<FileDecision>,
) -> Result<Manifest, RebuildError> {
    let names = storage
        .list_dir(&paths.dir)
        .map_err(|error| RebuildError::ListDir {
            dir: paths.dir.clone(),
            error,
        })?;
    let mut decide = |name: &str, listed: Option<FileKind>, reason: String| {
        decisions.push(FileDecision {
            name: name.to_string(),
            listed,
            reason,
        })
    };
    let mut bases: BTreeMap<u64, Vec<(BasePart, String)>> = BTreeMap::new();
    let mut incrementals: BTreeMap<u64, String> = BTreeMap::new();
    for name in &names {
        match paths.parse_file_name(name) {
            Some(LogFileName::Base { seq, part }) => {
                bases.entry(seq).or_default().push((part, name.clone()))
            }
            Some(LogFileName::Incremental { seq }) => {
                incrementals.insert(seq, name.clone());
            }
            None if *name == paths.manifest_name() => {
                decide(name, None, "the manifest being replaced".into())
            }
            None if name.starts_with("temp-") => decide(
                name,
                None,
                "an unfinished write: start-up removes it".into(),
            ),
            None => decide(name, None, "not a file of this log: left alone".into()),
        }
    }
    if bases.is_empty() && incrementals.is_empty() {
        return Err(RebuildError::NoLogFiles);
    }
    // The highest complete base; those above it are unusable, those below superseded.
    let mut chosen: Option<(u64, BaseSet)> = None;
    for (seq, files) in bases.iter().rev() {
        if let Some((chosen_seq, _)) = &chosen {
            for (_, name) in files {
                let reason = format!("not listed: an older base, superseded by base {chosen_seq}");
                decide(name, None, reason);
            }
            continue;
        }
        match check_base_set(storage, paths, files.clone()) {
            Ok(set) => {
                let count = set.parts.len();
                let how = if set.first_incr.is_some() {
                    "as the parts record"
                } else {
                    "by their names and the slots of their keys (parts of an older version)"
                };
                for (index, (name, keys)) in set.parts.iter().enumerate() {
                    let reason = format!(
                        "base {seq}, part {} of {count}, {keys} keys: valid RDB, CRC64 checked; \
                         the parts hold every slot, {how}",
                        index + 1,
                    );
                    decide(name, Some(FileKind::Base), reason);
                }
                chosen = Some((*seq, set));
            }
            Err(why) => {
                for (_, name) in files {
                    let reason = format!(
                        "not listed: base {seq} is not a complete snapshot ({why}); start-up \
                         will remove it as what an interrupted compaction leaves"
                    );
                    decide(name, None, reason);
                }
            }
        }
    }
    let lowest_incr = incrementals.keys().next().copied();
    let (first, source) = match (first_incr_given, &chosen) {
        (Some(seq), _) => (seq, FirstIncr::Given),
        (
            None,
            Some((
                _,
                BaseSet {
                    first_incr: Some(seq),
                    ..
                },
            )),
        ) => (*seq, FirstIncr::Recorded),
        (None, Some((seq, _))) => {
            // Written before parts recorded it: every incremental file present follows the
            // base, unless an older base shows that a compaction's deletions were cut short.
            if bases.keys().any(|older| older < seq) {
                return Err(RebuildError::Ambiguous { base: *seq });
            }
            (lowest_incr.unwrap_or(1), FirstIncr::AllPresent)
        }
        (None, None) => match lowest_incr {
            Some(seq) if seq > 1 => return Err(RebuildError::NoStart { first_present: seq }),
            _ => (1, FirstIncr::FromOne),
        },
    };
    let mut manifest = Manifest {
        entries: chosen
            .iter()
            .flat_map(|(seq, set)| {
                set.parts.iter().map(|(name, _)| ManifestEntry {
                    name: name.clone(),
                    seq: *seq,
                    kind: FileKind::Base,
                })
            })
            .collect(),
    };
    let after: Vec<(u64, &String)> = incrementals
        .range(first..)
        .map(|(seq, name)| (*seq, name))
        .collect();
    // The first file itself must be there when the base names it: its records are the
    // ones right after the snapshot.
    if after.is_empty() && source == FirstIncr::Recorded {
        return Err(RebuildError::Missing { seq: first });
    }
    for (expected, (seq, _)) in (first..).zip(&after) {
        if *seq != expected {
            return Err(RebuildError::Missing { seq: expected });
        }
    }
    for (seq, name) in incrementals.range(..first) {
        let reason = match &chosen {
            Some((base, _)) => format!(
                "not listed: incremental file {seq} comes before base {base} (its records are \
                 in the snapshot)"
            ),
            None => format!("not listed: before incremental file {first}"),
        };
        decide(name, None, reason);
    }
    let base_seq = chosen.as_ref().map_or(0, |(seq, _)| *seq);
    let why_first = match source {
        FirstIncr::Given => "as --first-incr says".to_string(),
        FirstIncr::Recorded => format!("the first after base {base_seq}, as its parts record"),
        FirstIncr::AllPresent => format!(
            "base {base_seq} does not record its first incremental file (an older version \
             wrote it) and no older base is present: taking every incremental file"
        ),
        FirstIncr::FromOne => "no base: the log starts at incremental file 1".into(),
    };
    for (index, (seq, name)) in after.iter().enumerate() {
        let is_last = index + 1 == after.len();
        let scanned = super::scan::check_records(storage, &paths.file(name));
        let mut reason = format!("incremental file {seq}, in order from {first} ({why_first})");
        match scanned {
            Ok(bytes) => reason.push_str(&format!(": {bytes} bytes of complete records")),
            Err(damage) if is_last => reason.push_str(&format!(
                "; WARNING: {damage} — start-up cuts a torn last record (aof-load-truncated \
                 yes), otherwise run tessera-check-aof --fix on the new manifest"
            )),
            Err(damage) => {
                return Err(RebuildError::Damaged {
                    name: (*name).clone(),
                    damage,
                });
            }
        }
        decide(name, Some(FileKind::Incremental), reason);
        manifest.entries.push(ManifestEntry {
            name: (*name).clone(),
            seq: *seq,
            kind: FileKind::Incremental,
        });
    }
    if manifest.entries.is_empty() {
        return Err(RebuildError::NoLogFiles);
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::NO_EXPIRY;
    use crate::rdb::{RdbWriter, RdbWriterOptions};
    use crate::storage::SimulatedStorage;
    use std::path::PathBuf;

    fn paths() -> LogPaths {
        LogPaths {
            dir: PathBuf::from("appendonlydir"),
            base_name: "appendonly.aof".into(),
        }
    }

    fn write(storage: &SimulatedStorage, name: &str, bytes: &[u8]) {
        let paths = paths();
        storage.create_dir_all(&paths.dir).unwrap();
        let mut file = storage.create(&paths.file(name)).unwrap();
        file.append(bytes).unwrap();
    }

    /// Keys whose slots fall in part `part` (from 0) of `parts`.
    fn keys_of_part(part: usize, parts: usize) -> Vec<String> {
        let owned = crate::snapshot::part_slots(part, parts);
        (0..)
            .map(|i| format!("key:{i}"))
            .filter(|k| owned.contains(&key_slot(k.as_bytes())))
            .take(40)
            .collect()
    }

    /// Part `part` (from 0) of `parts` of base `seq`, written as compactions write it;
    /// `hinted` false: as versions before the hints did.
    fn write_part(storage: &SimulatedStorage, seq: u64, part: usize, parts: usize, hinted: bool) {
        let first_incr = seq + 1;
        let slots = crate::snapshot::part_slots(part, parts);
        let extra_aux = if hinted {
            [
                (AUX_PART, (part + 1).to_string()),
                (AUX_PARTS, parts.to_string()),
                (AUX_SLOTS, format!("{}-{}", slots.start(), slots.end())),
                (AUX_FIRST_INCR, first_incr.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.as_bytes().to_vec().into(), v.into_bytes().into()))
            .collect()
        } else {
            Vec::new()
        };
        let options = RdbWriterOptions {
            aof_base: true,
            extra_aux,
            ..RdbWriterOptions::default()
        };
        let mut writer = RdbWriter::new(Vec::new(), &options).unwrap();
        for key in keys_of_part(part, parts) {
            let entry = Entry {
                key: key.as_bytes().into(),
                value: crate::keyspace::Value::string(crate::types::Str::from(&b"v"[..])),
                expire_at_ms: NO_EXPIRY,
            };
            writer.write_entry(0, &entry).unwrap();
        }
        let (bytes, _) = writer.finish().unwrap();
        write(
            storage,
            &paths().base_part_name(seq, part + 1, parts),
            &bytes,
        );
    }

    fn remove(storage: &SimulatedStorage, name: &str) {
        storage.remove_file(&paths().file(name)).unwrap();
    }

    fn write_incr(storage: &SimulatedStorage, seq: u64, bytes: &[u8]) {
        write(storage, &paths().incremental_name(seq), bytes);
    }

    const RECORD: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n";

    fn listed(rebuild: &Rebuild) -> Vec<String> {
        let manifest = rebuild.result.as_ref().unwrap();
        manifest.entries.iter().map(|e| e.name.clone()).collect()
    }

    #[test]
    fn recorded_hints_choose_the_highest_complete_base_and_its_incremental_files() {
        let storage = SimulatedStorage::new();
        // Base 1 (2 parts) followed by incremental 2; base 2 (3 parts) followed by 3;
        // base 3 lost a part (an interrupted compaction).
        for part in 0..2 {
            write_part(&storage, 1, part, 2, true);
        }
        for part in 0..3 {
            write_part(&storage, 2, part, 3, true);
        }
        write_part(&storage, 3, 0, 3, true);
        write_part(&storage, 3, 1, 3, true);
        for seq in 1..=4 {
            write_incr(&storage, seq, RECORD);
        }
        let rebuild = rebuild(&storage, &paths(), None);
        assert_eq!(
            listed(&rebuild),
            [
                "appendonly.aof.2.base.1.rdb",
                "appendonly.aof.2.base.2.rdb",
                "appendonly.aof.2.base.3.rdb",
                "appendonly.aof.3.incr.aof",
                "appendonly.aof.4.incr.aof",
            ]
        );
        let reason = |name: &str| {
            rebuild
                .decisions
                .iter()
                .find(|d| d.name == name)
                .unwrap()
                .reason
                .clone()
        };
        assert!(reason("appendonly.aof.3.base.1.rdb").contains("2 of its 3 parts"));
        assert!(reason("appendonly.aof.1.base.1.rdb").contains("superseded by base 2"));
        assert!(reason("appendonly.aof.2.incr.aof").contains("comes before base 2"));
        // The first incremental file the base names must be there.
        remove(&storage, "appendonly.aof.3.incr.aof");
        let rebuild = super::rebuild(&storage, &paths(), None);
        assert!(matches!(
            rebuild.result,
            Err(RebuildError::Missing { seq: 3 })
        ));
    }

    #[test]
    fn parts_of_older_versions_are_judged_by_names_and_key_slots() {
        let storage = SimulatedStorage::new();
        for part in 0..3 {
            write_part(&storage, 1, part, 3, false);
        }
        write_incr(&storage, 2, RECORD);
        write_incr(&storage, 3, b"");
        assert_eq!(
            listed(&rebuild(&storage, &paths(), None)).len(),
            5,
            "every incremental file present follows the only base"
        );
        // Without its last part, part 2 holds keys outside what 2 parts would give it.
        remove(&storage, "appendonly.aof.1.base.3.rdb");
        let rebuild = super::rebuild(&storage, &paths(), None);
        assert!(matches!(
            rebuild.result,
            Err(RebuildError::NoStart { first_present: 2 })
        ));
        assert!(
            rebuild.decisions[0]
                .reason
                .contains("part 2 holds keys outside the slots"),
            "{:?}",
            rebuild.decisions
        );
        // Only part 1 of several: a numbered part alone is never a whole snapshot.
        remove(&storage, "appendonly.aof.1.base.2.rdb");
        let rebuild = super::rebuild(&storage, &paths(), Some(2));
        assert_eq!(
            listed(&rebuild),
            ["appendonly.aof.2.incr.aof", "appendonly.aof.3.incr.aof"]
        );
        assert!(
            rebuild.decisions[0]
                .reason
                .contains("only one of its numbered parts")
        );
    }

    #[test]
    fn an_older_base_next_to_an_unhinted_one_makes_the_boundary_a_question() {
        let storage = SimulatedStorage::new();
        write_part(&storage, 1, 0, 1, false);
        write_part(&storage, 2, 0, 1, false);
        for seq in 1..=3 {
            write_incr(&storage, seq, RECORD);
        }
        let rebuild = rebuild(&storage, &paths(), None);
        assert!(
            matches!(rebuild.result, Err(RebuildError::Ambiguous { base: 2 })),
            "{:?}",
            rebuild.result
        );
        assert!(
            rebuild
                .result
                .unwrap_err()
                .to_string()
                .contains("--first-incr")
        );
        let rebuild = super::rebuild(&storage, &paths(), Some(3));
        assert_eq!(
            listed(&rebuild),
            ["appendonly.aof.2.base.rdb", "appendonly.aof.3.incr.aof"]
        );
    }

    #[test]
    fn gaps_and_damage_in_incremental_files() {
        let storage = SimulatedStorage::new();
        write_part(&storage, 1, 0, 1, true);
        write_incr(&storage, 2, RECORD);
        write_incr(&storage, 4, RECORD);
        let rebuild = rebuild(&storage, &paths(), None);
        assert!(matches!(
            rebuild.result,
            Err(RebuildError::Missing { seq: 3 })
        ));
        // A damaged file before the last: the files after it can't be used.
        write_incr(&storage, 3, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1");
        let rebuild = super::rebuild(&storage, &paths(), None);
        assert!(
            matches!(&rebuild.result, Err(RebuildError::Damaged { name, .. }) if name == "appendonly.aof.3.incr.aof"),
            "{:?}",
            rebuild.result
        );
        // The last one may end torn: start-up (or --fix) cuts it.
        write_incr(&storage, 3, RECORD);
        write_incr(&storage, 4, b"*3\r\n$3\r\nSET\r\n$1");
        let rebuild = super::rebuild(&storage, &paths(), None);
        assert_eq!(listed(&rebuild).len(), 4);
        let last = rebuild
            .decisions
            .iter()
            .find(|d| d.name.contains(".4."))
            .unwrap();
        assert!(last.reason.contains("WARNING"), "{last:?}");
    }

    #[test]
    fn a_log_without_a_base_starts_at_one() {
        let storage = SimulatedStorage::new();
        write_incr(&storage, 1, RECORD);
        write_incr(&storage, 2, RECORD);
        assert_eq!(listed(&rebuild(&storage, &paths(), None)).len(), 2);
        remove(&storage, "appendonly.aof.1.incr.aof");
        let rebuild = rebuild(&storage, &paths(), None);
        assert!(matches!(
            rebuild.result,
            Err(RebuildError::NoStart { first_present: 2 })
        ));
        let empty = SimulatedStorage::new();
        empty.create_dir_all(&paths().dir).unwrap();
        assert!(matches!(
            super::rebuild(&empty, &paths(), None).result,
            Err(RebuildError::NoLogFiles)
        ));
    }

    #[test]
    fn the_log_name_is_read_from_the_files() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            infer_base_name(&names(&["my.aof.3.base.2.rdb", "my.aof.4.incr.aof", "x"])).unwrap(),
            "my.aof"
        );
        assert_eq!(
            infer_base_name(&names(&["a.1.incr.aof", "mine.manifest"])).unwrap(),
            "mine"
        );
        assert_eq!(infer_base_name(&names(&["x"])).unwrap(), "appendonly.aof");
        assert!(matches!(
            infer_base_name(&names(&["a.1.incr.aof", "b.1.incr.aof"])),
            Err(RebuildError::SeveralLogs(_))
        ));
    }
}
