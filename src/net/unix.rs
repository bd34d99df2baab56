//! The Unix socket of `unixsocket`.
//!
//! Created as Redis 7.0.15 creates it (a stale file at the path is removed first), with
//! one difference that is Redis's own later fix for CVE-2023-45145: the socket gets the
//! permissions of `unixsocketperm` as it is created (the process's umask narrowed around
//! bind(2)), not by a chmod after it, so no client can connect in between with the
//! default permissions.

use mio::net::UnixListener;
use socket2::{Domain, SockAddr, Socket, Type};
use std::io;

/// The longest path a `sockaddr_un` holds, without its terminating zero.
const PATH_MAX_BYTES: usize = 107;

/// Why the Unix socket could not be opened, in Redis's words.
#[derive(Debug)]
pub enum UnixSocketError {
    TooLong(usize),
    Step(&'static str, io::Error),
}

impl std::fmt::Display for UnixSocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnixSocketError::TooLong(len) => write!(
                f,
                "unix socket path too long ({len}), must be under {}",
                PATH_MAX_BYTES + 1
            ),
            UnixSocketError::Step(step, e) => {
                write!(f, "{step}: {}", crate::process::os_error_text(e))
            }
        }
    }
}

/// Opens a non-blocking, close-on-exec Unix socket at `path`, listening with `backlog`.
/// `perm` 0 leaves the permissions to the umask, as Redis does.
pub fn listen(path: &str, perm: u32, backlog: i32) -> Result<UnixListener, UnixSocketError> {
    if path.len() > PATH_MAX_BYTES {
        return Err(UnixSocketError::TooLong(path.len()));
    }
    let step = |name| move |e| UnixSocketError::Step(name, e);
    // A socket file left by an earlier run would make bind fail; Redis removes it too.
    let _ = std::fs::remove_file(path);
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None).map_err(step("socket"))?;
    let address = SockAddr::unix(path).map_err(step("socket address"))?;
    let bound = with_umask_for(perm, || socket.bind(&address));
    bound.map_err(step("bind"))?;
    socket.listen(backlog).map_err(step("listen"))?;
    socket
        .set_nonblocking(true)
        .map_err(step("fcntl O_NONBLOCK"))?;
    let fd = std::os::fd::OwnedFd::from(socket);
    Ok(UnixListener::from_std(fd.into()))
}

/// Runs `create` with the umask that gives a new socket file exactly `perm` (when not 0).
/// The umask is the process's: this runs at start-up, before the threads that create
/// files (the loader, the log writer, snapshot writers) exist.
fn with_umask_for<T>(perm: u32, create: impl FnOnce() -> T) -> T {
    if perm == 0 {
        return create();
    }
    // SAFETY: umask(2) only swaps the process's file-creation mask; it cannot fail.
    let previous = unsafe { libc::umask(!perm as libc::mode_t & 0o777) };
    let result = create();
    // SAFETY: as above, restoring the mask read before.
    unsafe { libc::umask(previous) };
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};

    #[test]
    fn the_socket_is_created_with_its_permissions_over_a_stale_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tessera.sock");
        std::fs::write(&path, b"left by an earlier run").unwrap();
        let path = path.to_str().unwrap();
        let listener = listen(path, 0o700, 16).unwrap();
        let meta = std::fs::metadata(path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        drop(listener);
        let long = format!("/tmp/{}", "x".repeat(120));
        assert_eq!(
            listen(&long, 0, 16).unwrap_err().to_string(),
            "unix socket path too long (125), must be under 108"
        );
    }
}
