//! Why the server could not start, run on, or shut down (texts as the log shows them).

use std::error::Error;
use std::fmt;
use std::io;

#[derive(Debug)]
pub enum ServerError {
    /// Setting up the event loop failed: which part, and the system's error.
    Setup(&'static str, io::Error),
    Listen(crate::net::ListenError),
    /// The start-up load refused or failed (the reason names files and offsets).
    Load(crate::recovery::LoadError),
    LoadPanicked,
    OpenLog(io::Error),
    EventLoop(io::Error),
    /// The final snapshot of SHUTDOWN SAVE could not be written (the server runs on).
    FinalSnapshot(crate::snapshot::SnapshotError),
    /// The log could not be synced at SHUTDOWN (the server runs on, the writer retrying).
    LogSync(crate::log::writer::LogError),
    /// SHUTDOWN without FORCE while the log is being turned on: its base is not written
    /// yet (Redis's "Writing initial AOF, can't exit."; the server runs on).
    InitialLog,
    /// The users could not be loaded (`user` lines, the aclfile): Redis's message.
    Acl(String),
    /// A second SIGINT while a signal's shutdown was not over: exit at once, unclean.
    Insisted,
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Setup(what, e) => write!(f, "can't {what}: {e}"),
            ServerError::Listen(e) => write!(f, "{e}"),
            ServerError::Load(e) => write!(f, "{e}"),
            ServerError::Acl(e) => f.write_str(e),
            ServerError::FinalSnapshot(e) => write!(f, "{e}"),
            ServerError::LogSync(e) => write!(f, "can't sync the append-only log: {e}"),
            ServerError::LoadPanicked => f.write_str("the loading thread panicked"),
            ServerError::OpenLog(e) => write!(f, "can't open the append-only log: {e}"),
            ServerError::EventLoop(e) => write!(f, "event loop failed: {e}"),
            ServerError::Insisted => f.write_str("You insist... exiting now."),
            ServerError::InitialLog => f.write_str("Writing initial AOF, can't exit."),
        }
    }
}

impl Error for ServerError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ServerError::Setup(_, e) | ServerError::OpenLog(e) | ServerError::EventLoop(e) => {
                Some(e)
            }
            ServerError::LogSync(e) => Some(e),
            // Shown as their own text: their source is the inner error's.
            ServerError::Listen(e) => e.source(),
            ServerError::Load(e) => e.source(),
            ServerError::FinalSnapshot(e) => e.source(),
            ServerError::LoadPanicked
            | ServerError::Acl(_)
            | ServerError::Insisted
            | ServerError::InitialLog => None,
        }
    }
}
