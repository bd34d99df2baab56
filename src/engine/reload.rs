//! Taking a dataset loaded again from disk (DEBUG RELOAD, DEBUG LOADAOF). The event loop
//! persists it and loads it into a keyspace of its own (`server::reload`, through
//! `recovery::load_dataset`, the start-up path); the engine then puts it in place of the
//! current one — telling WATCH and client-side caching as a flush does, as Redis's
//! `emptyData` does — or adds it to the current one (NOFLUSH).
//!
//! Nothing is changed unless all of it can be: a key or a function library already there
//! is a conflict unless MERGE lets the loaded one replace it, and a conflict fails the
//! whole load (Redis stops the server on a duplicated key).

use super::{Engine, Host};
use crate::commands::SessionState;
use crate::keyspace::Keyspace;
use crate::scripting::functions::{LibraryError, RestorePolicy};
use crate::tracking::Origin;

/// Why a loaded dataset was not taken; the dataset is as it was.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error("duplicated key '{key}' in DB {db} (loading without MERGE)")]
    DuplicateKey { db: usize, key: String },
    #[error("function library: {0}")]
    Function(#[from] LibraryError),
}

/// How a loaded dataset joins the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adopt {
    /// It replaces the current dataset and function libraries.
    Replace,
    /// It is added; `merge`: its keys and libraries replace those of the same names,
    /// otherwise any such conflict refuses the whole of it.
    Add { merge: bool },
}

impl Engine {
    /// Puts `loaded` (its keys and its libraries' code) in place as `how` says. Returns
    /// what client-side caching has for `session` (the requester, out of the host's
    /// table), which goes after its reply as every such message for a running client.
    pub fn adopt_dataset(
        &mut self,
        session: &SessionState,
        loaded: Keyspace,
        functions: &[bytes::Bytes],
        how: Adopt,
        host: &mut dyn Host,
    ) -> Result<Vec<u8>, AdoptError> {
        assert_eq!(
            loaded.dbs.len(),
            self.keyspace.dbs.len(),
            "loaded with the server's configuration"
        );
        let mut origin = Origin::new(session.id, session.resp3, session.subscriptions.any());
        match how {
            Adopt::Replace => {
                self.state
                    .scripting
                    .restore_libraries(functions, RestorePolicy::Flush)?;
                // Redis's `signalFlushedDb`: watchers of existing keys and every tracking
                // client learn that the dataset went.
                for db in 0..self.keyspace.dbs.len() {
                    let now_ms = crate::clock::unix_ms();
                    self.state
                        .watches
                        .touch_db(&self.keyspace, db, None, now_ms);
                }
                self.state.tracking.flushed(&mut |id, message| {
                    Origin::route(Some(&mut origin), host, id, message)
                });
                self.keyspace = loaded;
            }
            Adopt::Add { merge } => {
                if !merge {
                    self.check_no_duplicates(&loaded)?;
                }
                let policy = if merge {
                    RestorePolicy::Replace
                } else {
                    RestorePolicy::Append
                };
                self.state.scripting.restore_libraries(functions, policy)?;
                // Keys of the same name are replaced (`Db::insert`), as MERGE asks.
                for (db, added) in self.keyspace.dbs.iter_mut().zip(loaded.dbs) {
                    db.absorb(added);
                }
            }
        }
        Ok(origin.messages)
    }

    /// The first key of `loaded` the current dataset has too, as an error.
    fn check_no_duplicates(&self, loaded: &Keyspace) -> Result<(), AdoptError> {
        for (index, (db, added)) in self.keyspace.dbs.iter().zip(&loaded.dbs).enumerate() {
            if db.is_empty() {
                continue;
            }
            for slot in added.slots() {
                if let Some(entry) = slot.iter().find(|entry| db.get(&entry.key).is_some()) {
                    return Err(AdoptError::DuplicateKey {
                        db: index,
                        key: String::from_utf8_lossy(&entry.key).into_owned(),
                    });
                }
            }
        }
        Ok(())
    }
}
