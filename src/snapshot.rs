//! Whole-dataset snapshots to a single RDB file (`SAVE`, `SHUTDOWN SAVE`, `dump.rdb`).
//!
//! This is the synchronous form: the event loop writes the file itself, as Redis's `SAVE`
//! does. The forkless background capture of the compaction work (slot captures handed to
//! writer threads) will produce the same files without blocking the loop.
//!
//! Crash safety: the file is written under a temporary name, fsynced, renamed over
//! `dbfilename`, and the directory fsynced, so `dump.rdb` is always a complete snapshot.

use crate::keyspace::{Entry, Keyspace};
use crate::rdb::{RdbError, RdbWriter, RdbWriterOptions};
use std::io::BufWriter;
use std::path::Path;

/// Writes every database of `keyspace` to `dir/file_name` atomically; returns its size.
pub fn save(keyspace: &Keyspace, dir: &Path, file_name: &str) -> Result<u64, String> {
    let temp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let result = write_rdb(keyspace, &temp).and_then(|size| {
        std::fs::rename(&temp, dir.join(file_name))
            .and_then(|()| crate::log::manifest::sync_dir(dir))
            .map_err(|e| format!("can't move the snapshot into place: {e}"))?;
        Ok(size)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn write_rdb(keyspace: &Keyspace, path: &Path) -> Result<u64, String> {
    let describe = |e: RdbError| format!("can't write {}: {e}", path.display());
    let file =
        std::fs::File::create(path).map_err(|e| format!("can't create {}: {e}", path.display()))?;
    let mut writer = RdbWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        &RdbWriterOptions::default(),
    )
    .map_err(describe)?;
    for (index, db) in keyspace.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        let index = index as u32;
        writer
            .select_db(index, db.len() as u64, db.volatile_len() as u64)
            .map_err(describe)?;
        for slot in db.slots() {
            for entry in slot.iter() {
                writer.write_entry(index, entry).map_err(describe)?;
            }
        }
    }
    let (buffered, size) = writer.finish().map_err(describe)?;
    let file = buffered
        .into_inner()
        .map_err(|e| format!("can't write {}: {e}", path.display()))?;
    file.sync_all()
        .map_err(|e| format!("can't fsync {}: {e}", path.display()))?;
    Ok(size)
}

/// Reads the live keys of an RDB file: keys already expired are dropped, as Redis does at
/// start-up. Returns them with their database, and the bytes read.
pub fn read_live_entries(path: &Path, databases: u32) -> Result<(Vec<(u32, Entry)>, u64), String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("can't open {}: {e}", path.display()))?;
    let now_ms = crate::clock::unix_ms();
    let mut entries = Vec::new();
    let mut visitor = |db: u32, entry: Entry| {
        if db >= databases {
            return Err(format!(
                "database {db} is out of range (databases {databases})"
            ));
        }
        if !entry.is_expired(now_ms) {
            entries.push((db, entry));
        }
        Ok(())
    };
    let summary = crate::rdb::load(
        std::io::BufReader::with_capacity(1 << 20, file),
        &mut visitor,
    )
    .map_err(|e| format!("Bad snapshot file {}: {e}", path.display()))?;
    Ok((entries, summary.bytes))
}

/// Loads an RDB file into `keyspace` (start-up with the log off); returns the keys loaded.
pub fn load(keyspace: &mut Keyspace, path: &Path) -> Result<u64, String> {
    let (entries, _) = read_live_entries(path, keyspace.dbs.len() as u32)?;
    let count = entries.len() as u64;
    for (db, entry) in entries {
        keyspace.dbs[db as usize].insert(entry);
    }
    Ok(count)
}
