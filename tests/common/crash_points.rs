//! Which crash tests stop at each checkpoint (`tessera::storage::CrashPoint`), so that the
//! tests iterate the points the code declares instead of copies of their names, and a new
//! checkpoint is given its crash tests (or none, deliberately) before the tests compile.

use tessera::storage::CrashPoint;

/// A multi-step protocol whose crash tests stop at every one of its checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// BGREWRITEAOF: tests/crash.rs (power loss) and tests/compaction.rs (SIGKILL) stop at
    /// every checkpoint a compaction reaches, each occurrence (`compaction_steps`).
    Compaction,
    /// BGREWRITEAOF with the log off, a base written alone: tests/crash.rs (power loss)
    /// stops at every checkpoint it reaches.
    BaseAlone,
    /// SAVE: tests/fault_paths.rs.
    Save,
    /// BGSAVE: tests/fault_paths.rs.
    Bgsave,
}

/// The protocols whose crash tests stop at `point`. The match has no wildcard on purpose.
pub fn crash_tested_in(point: CrashPoint) -> &'static [Protocol] {
    use CrashPoint::*;
    use Protocol::*;
    match point {
        RewriteIncrCreated | RewriteIncrCommitted => &[Compaction],
        ManifestTempWritten | ManifestRenamed | RewritePartsDurable | RewriteCommitted
        | RewriteDeletedOne | RewriteDeletedAll => &[Compaction, BaseAlone],
        SnapshotFirstCaptureTaken | SnapshotPartSynced | SnapshotPartsWritten => {
            &[Compaction, BaseAlone, Bgsave]
        }
        SaveTempWritten | SaveTempSynced => &[Save],
        DumpRenamed | DumpDirSynced => &[Save, Bgsave],
    }
}

/// The checkpoints of `protocol`, in the order of `CrashPoint::ALL`.
pub fn points_of(protocol: Protocol) -> Vec<CrashPoint> {
    CrashPoint::ALL
        .iter()
        .copied()
        .filter(|point| crash_tested_in(*point).contains(&protocol))
        .collect()
}
