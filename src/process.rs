//! What the process sets up before the server starts: the open-files limit that
//! `maxclients` needs (Redis's `adjustOpenFilesLimit`), and the lock that keeps a second
//! server off a data directory.

use std::fs::{File, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// Descriptors kept for the server's own use beyond one per client (Redis's
/// CONFIG_MIN_RESERVED_FDS).
pub const RESERVED_FDS: u64 = 32;

/// The lock file in the data directory (`dir`). It holds the pid of the server that has
/// the directory; the lock itself is an exclusive `flock` the kernel releases when the
/// process ends, however it ends. The file stays: removing it would let two servers lock
/// two different files of the same name.
pub const LOCK_FILE: &str = "tessera.lock";

/// An OS error's text without Rust's " (os error N)" suffix: what C's strerror gives.
pub fn os_error_text(e: &io::Error) -> String {
    let text = e.to_string();
    match (e.raw_os_error(), text.rfind(" (os error ")) {
        (Some(_), Some(at)) => text[..at].to_string(),
        _ => text,
    }
}

/// The open-files limit cannot hold even the reserved descriptors.
#[derive(Debug)]
pub struct LimitError {
    pub current: u64,
    pub needed: u64,
}

impl std::fmt::Display for LimitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Your current 'ulimit -n' of {} is not enough for the server to start. Please increase your open file limit to at least {}. Exiting.",
            self.current, self.needed
        )
    }
}

impl std::error::Error for LimitError {}

fn get_nofile() -> io::Result<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(limit)
}

fn set_nofile(soft: u64, hard: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `limit` is a valid rlimit, only read by the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft open-files limit to `maxclients + RESERVED_FDS` and returns the
/// `maxclients` the limit allows: the one asked for, or less (with Redis's warnings) when
/// the limit cannot be raised that far. As Redis, it tries the full amount, then 16
/// fewer at a time down to the current limit. Unlike Redis it keeps the hard limit where
/// it is (raising it only when the target is above it and the process may), so that a
/// later CONFIG SET maxclients can still raise the soft limit.
pub fn adjust_open_files_limit(maxclients: usize) -> Result<usize, LimitError> {
    let wanted = maxclients as u64 + RESERVED_FDS;
    let limit = match get_nofile() {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(
                "Unable to obtain the current NOFILE limit ({}), assuming 1024 and setting the max clients configuration accordingly.",
                os_error_text(&e)
            );
            return Ok((1024 - RESERVED_FDS) as usize);
        }
    };
    let old = limit.rlim_cur;
    if old >= wanted {
        return Ok(maxclients);
    }
    let mut best = wanted;
    let mut error = None;
    while best > old {
        match set_nofile(best, limit.rlim_max.max(best)) {
            Ok(()) => break,
            Err(e) => error = Some(e),
        }
        if best < 16 {
            best = old;
            break;
        }
        best -= 16;
    }
    let best = best.max(old);
    if best >= wanted {
        tracing::info!(
            "Increased maximum number of open files to {wanted} (it was originally set to {old})."
        );
        return Ok(maxclients);
    }
    if best <= RESERVED_FDS {
        return Err(LimitError {
            current: old,
            needed: wanted,
        });
    }
    let reduced = (best - RESERVED_FDS) as usize;
    let reason = error.as_ref().map(os_error_text).unwrap_or_default();
    tracing::warn!(
        "You requested maxclients of {maxclients} requiring at least {wanted} max file descriptors."
    );
    tracing::warn!(
        "Server can't set maximum open files to {wanted} because of OS error: {reason}."
    );
    tracing::warn!(
        "Current maximum open files is {best}. maxclients has been reduced to {reduced} to compensate for low ulimit. If you need higher maxclients increase 'ulimit -n'."
    );
    Ok(reduced)
}

/// Why the data directory could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock (its pid, if the file tells).
    Held {
        path: PathBuf,
        pid: Option<u32>,
    },
    Io {
        path: PathBuf,
        source: io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Held { path, pid } => {
                write!(
                    f,
                    "the data directory is in use by another server: {} is locked",
                    path.display()
                )?;
                if let Some(pid) = pid {
                    write!(f, " by pid {pid}")?;
                }
                write!(f, "; two servers must not share a data directory")
            }
            LockError::Io { path, source } => write!(
                f,
                "can't lock the data directory with {}: {}",
                path.display(),
                os_error_text(source)
            ),
        }
    }
}

impl std::error::Error for LockError {}

/// Holds the data directory for the life of the process: dropping it, or the process
/// ending in any way, releases the lock.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Takes the exclusive lock on `<dir>/tessera.lock` (creating the file) and writes this
/// process's pid into it. Fails at once if another process holds it.
pub fn lock_data_dir(dir: &Path) -> Result<DirLock, LockError> {
    let path = dir.join(LOCK_FILE);
    let io_error = |source| LockError::Io {
        path: path.clone(),
        source,
    };
    // Not truncated on open: the holder's pid must stay readable for the message.
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io_error)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(LockError::Held {
                pid: text.trim().parse().ok(),
                path,
            });
        }
        Err(TryLockError::Error(e)) => return Err(io_error(e)),
    }
    file.set_len(0).map_err(io_error)?;
    file.rewind().map_err(io_error)?;
    writeln!(file, "{}", std::process::id()).map_err(io_error)?;
    Ok(DirLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_text_is_strerror() {
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(os_error_text(&e), "No such file or directory");
        let custom = io::Error::other("plain");
        assert_eq!(os_error_text(&custom), "plain");
    }

    #[test]
    fn a_second_lock_on_a_directory_fails_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("tessera-lock-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = lock_data_dir(&dir).unwrap();
        match lock_data_dir(&dir) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        let again = lock_data_dir(&dir).unwrap();
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
