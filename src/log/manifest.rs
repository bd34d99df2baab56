//! The manifest: the only source of truth for which log files make up the dataset.
//!
//! Format (Redis 7's): one line per file, `file <name> seq <n> type <b|i|h>`, base first,
//! then incremental files in order. It is replaced atomically: write a temp file, fsync,
//! rename over the old one, fsync the directory. Files it does not list are garbage.

use crate::storage::Storage;
use std::path::Path;

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

impl Manifest {
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words = crate::resp::split_args(line.as_bytes())
                .ok_or_else(|| format!("invalid manifest line {}: unbalanced quotes", index + 1))?;
            let words: Vec<String> = words
                .into_iter()
                .map(|w| String::from_utf8_lossy(&w).into_owned())
                .collect();
            let mut name = None;
            let mut seq = None;
            let mut kind = None;
            for pair in words.chunks(2) {
                let [key, value] = pair else {
                    return Err(format!(
                        "invalid manifest line {}: odd number of words",
                        index + 1
                    ));
                };
                match key.as_str() {
                    "file" => name = Some(value.clone()),
                    "seq" => seq = value.parse::<u64>().ok(),
                    "type" => {
                        kind = match value.as_str() {
                            "b" => Some(FileKind::Base),
                            "i" => Some(FileKind::Incremental),
                            "h" => Some(FileKind::History),
                            _ => None,
                        }
                    }
                    _ => {} // Unknown fields are ignored, as Redis does.
                }
            }
            match (name, seq, kind) {
                (Some(name), Some(seq), Some(kind)) if !name.contains('/') => {
                    entries.push(ManifestEntry { name, seq, kind })
                }
                _ => return Err(format!("invalid manifest line {}: '{line}'", index + 1)),
            }
        }
        let manifest = Manifest { entries };
        let incr_seqs: Vec<u64> = manifest.incremental().map(|e| e.seq).collect();
        if incr_seqs.windows(2).any(|w| w[0] >= w[1]) {
            return Err("invalid manifest: incremental files out of order".into());
        }
        Ok(manifest)
    }

    pub fn to_text(&self) -> String {
        let mut text = String::new();
        for entry in &self.entries {
            text.push_str(&format!(
                "file {} seq {} type {}\n",
                entry.name,
                entry.seq,
                entry.kind.code()
            ));
        }
        text
    }

    pub fn incremental(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.entries
            .iter()
            .filter(|e| e.kind == FileKind::Incremental)
    }

    pub fn base(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.entries.iter().filter(|e| e.kind == FileKind::Base)
    }

    pub fn last_incremental(&self) -> Option<&ManifestEntry> {
        self.incremental().last()
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
            storage.checkpoint("manifest-temp-written");
            storage.rename(&temp, &dir.join(file_name))
        };
        write().map_err(CommitError::NotCommitted)?;
        storage.checkpoint("manifest-renamed");
        storage.sync_dir(dir).map_err(CommitError::NotDurable)
    }
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

    #[test]
    fn round_trip_and_redis_format() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\nfile appendonly.aof.2.incr.aof seq 2 type i\n";
        let manifest = Manifest::parse(text).unwrap();
        assert_eq!(manifest.entries.len(), 3);
        assert_eq!(manifest.base().count(), 1);
        assert_eq!(manifest.last_incremental().unwrap().seq, 2);
        assert_eq!(manifest.to_text(), text);
        assert!(Manifest::parse("file x seq 1\n").is_err());
        assert!(Manifest::parse("file ../x seq 1 type i\n").is_err());
        assert!(Manifest::parse("file a seq 2 type i\nfile b seq 1 type i\n").is_err());
    }
}
