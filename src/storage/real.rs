//! [`RealStorage`]: the real file system, and the crash hook of the tests that run the
//! server binary (`TESSERA_CRASH_AT`, with the `fault-injection` feature only).

#[cfg(any(test, feature = "fault-injection"))]
use super::CrashPoint;
use super::{Storage, StorageFile};
use std::io;
use std::path::{Path, PathBuf};

/// `std::fs`, with every path joined onto `root`.
#[derive(Clone, Debug)]
pub struct RealStorage {
    root: PathBuf,
}

impl RealStorage {
    pub fn new(root: impl Into<PathBuf>) -> RealStorage {
        RealStorage { root: root.into() }
    }

    fn full(&self, path: &Path) -> PathBuf {
        self.root.join(path)
    }
}

struct RealFile {
    file: std::fs::File,
}

impl Storage for RealStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        // Truncate first, then reopen with O_APPEND: `append` and `truncate` cannot be
        // combined in one open, and O_APPEND keeps appends at the end after a `set_len`.
        std::fs::File::create(self.full(path))?;
        self.open_append(path)
    }

    fn open_append(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .open(self.full(path))?;
        Ok(Box::new(RealFile { file }))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn StorageFile>> {
        let file = std::fs::File::open(self.full(path))?;
        Ok(Box::new(RealFile { file }))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(self.full(path))
    }

    fn len(&self, path: &Path) -> io::Result<u64> {
        Ok(std::fs::metadata(self.full(path))?.len())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(self.full(from), self.full(to))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(self.full(path))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(self.full(path))
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(self.full(path))?.sync_all()
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(self.full(path))? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    }

    #[cfg(any(test, feature = "fault-injection"))]
    fn reach_checkpoint(&self, point: CrashPoint) {
        crash_hook::reached(point);
    }
}

impl StorageFile for RealFile {
    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        io::Write::write_all(&mut self.file, bytes)
    }

    fn read_at(&self, offset: u64, buffer: &mut [u8]) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(&self.file, buffer, offset)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&mut self, length: u64) -> io::Result<()> {
        self.file.set_len(length)
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn sync_all(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn write_back(&mut self, offset: u64, length: u64, wait: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let flags = if wait {
            libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE
        } else {
            libc::SYNC_FILE_RANGE_WRITE
        };
        let (Ok(offset), Ok(length)) = (i64::try_from(offset), i64::try_from(length)) else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        // SAFETY: sync_file_range on a descriptor this handle owns, with plain integers; it
        // reads and writes no memory of ours.
        let result = unsafe { libc::sync_file_range(self.file.as_raw_fd(), offset, length, flags) };
        if result == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn try_clone(&self) -> io::Result<Box<dyn StorageFile>> {
        Ok(Box::new(RealFile {
            file: self.file.try_clone()?,
        }))
    }
}

/// The environment variable naming the checkpoint at which the process kills itself:
/// `name` (its first occurrence) or `name:N` (its Nth); see [`super::CrashStep`].
#[cfg(any(test, feature = "fault-injection"))]
pub const CRASH_AT_ENV: &str = "TESSERA_CRASH_AT";

/// A test hook: when `TESSERA_CRASH_AT` names a checkpoint, the process dies there by
/// SIGKILL, as `kill -9` at exactly this point would do (no cleanup; what was written stays
/// in the page cache). The variable is read once; a checkpoint then costs a comparison.
#[cfg(any(test, feature = "fault-injection"))]
mod crash_hook {
    use super::CRASH_AT_ENV;
    use crate::storage::{CrashPoint, CrashStep};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};

    pub(super) fn reached(point: CrashPoint) {
        static TARGET: OnceLock<Option<CrashStep>> = OnceLock::new();
        // How many times the target's checkpoint was reached so far.
        static REACHED: AtomicU64 = AtomicU64::new(0);
        let Some(target) = TARGET.get_or_init(target_from_environment) else {
            return;
        };
        if target.point == point && REACHED.fetch_add(1, Ordering::Relaxed) + 1 == target.nth {
            tracing::warn!("crashing at step '{point}' ({CRASH_AT_ENV} is set)");
            // SAFETY: kill(2) with the process's own id has no memory-safety preconditions.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
            // SIGKILL cannot be caught; wait for it to land.
            loop {
                std::thread::park();
            }
        }
    }

    /// The step `TESSERA_CRASH_AT` names, if it is set; a value that names none is
    /// reported and ignored (a test that relies on it fails for want of the crash).
    fn target_from_environment() -> Option<CrashStep> {
        let text = std::env::var(CRASH_AT_ENV).ok()?;
        match text.parse() {
            Ok(step) => Some(step),
            Err(error) => {
                tracing::error!("{CRASH_AT_ENV} ignored: {error}");
                None
            }
        }
    }
}
