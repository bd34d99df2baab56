//! Why the server could not start, run on, or shut down (texts as the log shows them).

use std::fmt;
use std::io;

#[derive(Debug)]
pub enum ServerError {
    /// Setting up the event loop failed: which part, and the system's error.
    Setup(&'static str, io::Error),
    Listen(crate::net::ListenError),
    /// The start-up load refused or failed (the reason names files and offsets).
    Load(String),
    LoadPanicked,
    OpenLog(io::Error),
    EventLoop(io::Error),
    /// The final snapshot of SHUTDOWN SAVE could not be written (the server runs on).
    FinalSnapshot(crate::snapshot::SnapshotError),
    /// The log could not be synced at SHUTDOWN (the server runs on, the writer retrying).
    LogSync(crate::log::writer::LogError),
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServerError::Setup(what, e) => write!(f, "can't {what}: {e}"),
            ServerError::Listen(e) => write!(f, "{e}"),
            ServerError::Load(message) => f.write_str(message),
            ServerError::FinalSnapshot(e) => write!(f, "{e}"),
            ServerError::LogSync(e) => write!(f, "can't sync the append-only log: {e}"),
            ServerError::LoadPanicked => f.write_str("the loading thread panicked"),
            ServerError::OpenLog(e) => write!(f, "can't open the append-only log: {e}"),
            ServerError::EventLoop(e) => write!(f, "event loop failed: {e}"),
        }
    }
}

impl std::error::Error for ServerError {}
