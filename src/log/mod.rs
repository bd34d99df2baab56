//! The append-only log: a directory of files listed by a manifest, and the writer thread.
//!
//! ```text
//! <dir>/<appenddirname>/
//!   <appendfilename>.manifest            the only source of truth
//!   <appendfilename>.<seq>.incr.aof      RESP command log
//! ```
//!
//! Records are RESP commands in their deterministic form (see `commands::Ctx::propagate`),
//! with a `SELECT` whenever the database changes, so Redis 7 can load the directory too.

pub mod manifest;
pub mod writer;

use crate::config::Config;
use manifest::{FileKind, Manifest, ManifestEntry};
use std::fs::OpenOptions;
use std::path::PathBuf;

pub use writer::{LogWriter, Notify};

/// Where the log lives, from the configuration.
#[derive(Clone, Debug)]
pub struct LogPaths {
    pub dir: PathBuf,
    pub base_name: String,
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

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Reads the manifest; Ok(None) when there is none yet (a fresh directory).
    pub fn read_manifest(&self) -> Result<Option<Manifest>, String> {
        let path = self.manifest_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => Manifest::parse(&text)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("can't read {}: {e}", path.display())),
        }
    }
}

/// Creates the directory and a manifest with one empty incremental file (a fresh start).
pub fn create_fresh(paths: &LogPaths) -> std::io::Result<Manifest> {
    std::fs::create_dir_all(&paths.dir)?;
    let name = paths.incremental_name(1);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths.file(&name))?;
    file.sync_all()?;
    let manifest = Manifest {
        entries: vec![ManifestEntry {
            name,
            seq: 1,
            kind: FileKind::Incremental,
        }],
    };
    manifest.commit(&paths.dir, &paths.manifest_name())?;
    Ok(manifest)
}

/// Opens the manifest's last incremental file for appending and starts the writer.
pub fn open_writer(
    paths: &LogPaths,
    manifest: &Manifest,
    config: &Config,
    notify: Notify,
) -> std::io::Result<LogWriter> {
    let last = manifest
        .last_incremental()
        .expect("a manifest always lists an incremental file");
    let file = OpenOptions::new()
        .append(true)
        .open(paths.file(&last.name))?;
    let size = file.metadata()?.len();
    Ok(LogWriter::start(file, size, config.appendfsync, notify))
}

/// Removes files of ours that the manifest does not list (left by a crash mid-change).
pub fn remove_unlisted(paths: &LogPaths, manifest: &Manifest) {
    let Ok(entries) = std::fs::read_dir(&paths.dir) else {
        return;
    };
    let prefix = format!("{}.", paths.base_name);
    let manifest_name = paths.manifest_name();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with(&prefix) || name.starts_with("temp-");
        let listed = name == manifest_name || manifest.entries.iter().any(|e| e.name == name);
        if ours && !listed {
            tracing::info!("removing {name}: not listed in the manifest");
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
