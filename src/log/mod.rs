//! The append-only log: a directory of files listed by a manifest, and the writer thread.
//!
//! ```text
//! <dir>/<appenddirname>/
//!   <appendfilename>.manifest                  the only source of truth
//!   <appendfilename>.<seq>.base[.<part>].rdb   snapshot parts of the last compaction
//!   <appendfilename>.<seq>.incr.aof            RESP command log
//! ```
//!
//! Records are RESP commands in their deterministic form (see `commands::Ctx::propagate`),
//! with a `SELECT` whenever the database changes, so Redis 7 can load the directory too.
//! `startup` decides at start-up, from the committed manifest alone, which files are
//! garbage; `rebuild` rebuilds a lost manifest from the files (`tessera-check-aof`).

pub mod manifest;
pub mod rebuild;
pub mod scan;
pub mod startup;
pub mod writer;

use crate::config::Config;
use crate::storage::Storage;
use manifest::{FileKind, Manifest, ManifestEntry};
use std::path::PathBuf;

/// Aux field of a base part: its number, from 1.
pub const AUX_PART: &str = "tessera-part";
/// Aux field of a base part: how many parts the base has.
pub const AUX_PARTS: &str = "tessera-parts";
/// Aux field of a base part: the slots it holds, `<first>-<last>`.
pub const AUX_SLOTS: &str = "tessera-slots";
/// Aux field of a base part: the sequence number of the incremental file created by the
/// compaction's rotation, the first one whose records come after the snapshot.
pub const AUX_FIRST_INCR: &str = "tessera-first-incr";

pub use writer::{LogWriter, Notify};

/// Where the log lives, from the configuration.
#[derive(Clone, Debug)]
pub struct LogPaths {
    pub dir: PathBuf,
    pub base_name: String,
}

/// What a file's name says it is, by the naming rules of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFileName {
    Base { seq: u64, part: BasePart },
    Incremental { seq: u64 },
}

/// Which part of a base a file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BasePart {
    /// `<name>.<seq>.base.rdb`: the whole snapshot in one file (Redis's own name).
    Only,
    /// `<name>.<seq>.base.<i>.rdb`: part i (from 1) of a snapshot in several files.
    Numbered(usize),
    /// `<name>.<seq>.base.aof`: a base in RESP form (Redis with aof-use-rdb-preamble no).
    Resp,
}

impl LogFileName {
    pub fn seq(self) -> u64 {
        match self {
            LogFileName::Base { seq, .. } | LogFileName::Incremental { seq } => seq,
        }
    }
}

impl LogPaths {
    pub fn from_config(config: &Config) -> LogPaths {
        LogPaths {
            dir: config.dir.join(&config.appenddirname),
            base_name: config.appendfilename.clone(),
        }
    }

    pub fn manifest_name(&self) -> String {
        format!("{}.manifest", self.base_name)
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join(self.manifest_name())
    }

    pub fn incremental_name(&self, seq: u64) -> String {
        format!("{}.{seq}.incr.aof", self.base_name)
    }

    /// The name of snapshot part `part` (1-based) of base `seq`. A single part takes
    /// Redis's own name, so that Redis 7.0 finds nothing unusual in the directory.
    pub fn base_part_name(&self, seq: u64, part: usize, parts: usize) -> String {
        if parts == 1 {
            format!("{}.{seq}.base.rdb", self.base_name)
        } else {
            format!("{}.{seq}.base.{part}.rdb", self.base_name)
        }
    }

    /// The file a log being turned on appends to until its base is committed (Redis's
    /// name for it too); a `temp-` file, which start-up removes.
    pub fn temp_incremental_name(&self) -> String {
        format!("temp-{}.incr", self.base_name)
    }

    /// The name of a base in RESP form (`aof-use-rdb-preamble no`: one file, Redis's name).
    pub fn base_resp_name(&self, seq: u64) -> String {
        format!("{}.{seq}.base.aof", self.base_name)
    }

    /// The reverse of `incremental_name` and `base_part_name` (and Redis's RESP base
    /// name); None for any other name.
    pub fn parse_file_name(&self, name: &str) -> Option<LogFileName> {
        let rest = name.strip_prefix(&self.base_name)?.strip_prefix('.')?;
        let (seq, kind) = rest.split_once('.')?;
        let seq = decimal(seq).filter(|&seq| seq > 0)?;
        let part = match kind {
            "incr.aof" => return Some(LogFileName::Incremental { seq }),
            "base.rdb" => BasePart::Only,
            "base.aof" => BasePart::Resp,
            _ => {
                let part = kind.strip_prefix("base.")?.strip_suffix(".rdb")?;
                let part = decimal(part).filter(|&part| part > 0)?;
                BasePart::Numbered(usize::try_from(part).ok()?)
            }
        };
        Some(LogFileName::Base { seq, part })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Commits `manifest` atomically (see `Manifest::commit`).
    pub fn commit_manifest(
        &self,
        storage: &dyn Storage,
        manifest: &Manifest,
    ) -> Result<(), manifest::CommitError> {
        manifest.commit(storage, &self.dir, &self.manifest_name())
    }
}

/// Digits only (no sign, no spaces), as the log's own names are written.
fn decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Creates the directory, its name made durable.
pub fn create_dir(storage: &dyn Storage, paths: &LogPaths) -> std::io::Result<()> {
    storage.create_dir_all(&paths.dir)?;
    if let Some(parent) = paths.dir.parent() {
        storage.sync_dir(if parent.as_os_str().is_empty() {
            std::path::Path::new(".")
        } else {
            parent
        })?;
    }
    Ok(())
}

/// Creates the directory and a manifest with one empty incremental file (a fresh start).
pub fn create_fresh(storage: &dyn Storage, paths: &LogPaths) -> std::io::Result<Manifest> {
    create_dir(storage, paths)?;
    let name = paths.incremental_name(1);
    storage.create(&paths.file(&name))?.sync_all()?;
    let manifest = Manifest {
        entries: vec![ManifestEntry {
            name,
            seq: 1,
            kind: FileKind::Incremental,
        }],
    };
    // The manifest commit syncs the directory, which makes the new file's name durable.
    paths.commit_manifest(storage, &manifest)?;
    Ok(manifest)
}

/// Opens the manifest's last incremental file for appending and starts the writer.
/// Start-up (`startup::open_log_dir`) makes sure there is one.
pub fn open_writer(
    storage: &std::sync::Arc<dyn Storage>,
    paths: &LogPaths,
    manifest: &Manifest,
    config: &Config,
    notify: Notify,
) -> std::io::Result<LogWriter> {
    let last = manifest
        .last_incremental()
        .ok_or_else(|| std::io::Error::other("the manifest lists no incremental file"))?;
    let file = storage.open_append(&paths.file(&last.name))?;
    let size = file.len()?;
    Ok(LogWriter::start(
        storage.clone(),
        file,
        size,
        config.appendfsync,
        notify,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_read_back() {
        let paths = LogPaths {
            dir: PathBuf::from("d"),
            base_name: "appendonly.aof".into(),
        };
        assert_eq!(
            paths.parse_file_name(&paths.incremental_name(12)),
            Some(LogFileName::Incremental { seq: 12 })
        );
        assert_eq!(
            paths.parse_file_name(&paths.base_part_name(3, 1, 1)),
            Some(LogFileName::Base {
                seq: 3,
                part: BasePart::Only
            })
        );
        assert_eq!(
            paths.parse_file_name(&paths.base_part_name(3, 2, 4)),
            Some(LogFileName::Base {
                seq: 3,
                part: BasePart::Numbered(2)
            })
        );
        assert_eq!(
            paths.parse_file_name("appendonly.aof.7.base.aof"),
            Some(LogFileName::Base {
                seq: 7,
                part: BasePart::Resp
            })
        );
        for other in [
            "appendonly.aof.manifest",
            "temp-appendonly.aof.manifest",
            "appendonly.aof.0.incr.aof",
            "appendonly.aof.x.incr.aof",
            "appendonly.aof.-1.incr.aof",
            "appendonly.aof.1.incr.aof.bak",
            "appendonly.aof.1.base.0.rdb",
            "appendonly.aof.1.base..rdb",
            "appendonly.aof.99999999999999999999999.incr.aof",
            "other.aof.1.incr.aof",
            "appendonly.aof1.incr.aof",
        ] {
            assert_eq!(paths.parse_file_name(other), None, "{other}");
        }
    }
}
