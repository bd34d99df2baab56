//! The simulated disk against its durability model, and both implementations against one
//! script.

use super::*;
use crate::storage::{RealStorage, StorageReader};
use std::io::{Read, Write};

fn path(name: &str) -> &Path {
    Path::new(name)
}

/// A file created, written and synced, with its name made durable.
fn durable_file(storage: &SimulatedStorage, name: &str, bytes: &[u8]) {
    let mut file = storage.create(path(name)).unwrap();
    file.append(bytes).unwrap();
    file.sync_data().unwrap();
    storage.sync_dir(&parent_of(path(name))).unwrap();
}

#[test]
fn unsynced_appends_are_lost_and_synced_ones_kept() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"first ");
    let mut file = storage.open_append(path("log")).unwrap();
    file.append(b"second").unwrap();
    assert_eq!(storage.read(path("log")).unwrap(), b"first second");
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("log")).unwrap(), b"first ");
}

#[test]
fn sync_data_after_appends_keeps_them() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"a");
    let mut file = storage.open_append(path("log")).unwrap();
    file.append(b"b").unwrap();
    file.append(b"c").unwrap();
    file.sync_all().unwrap();
    file.append(b"d").unwrap();
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("log")).unwrap(), b"abc");
}

#[test]
fn torn_writes_keep_a_prefix_within_bounds() {
    let mut lengths = BTreeSet::new();
    for seed in 0..200 {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"synced|");
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(b"0123456789").unwrap();
        storage.power_loss(TornWrites::Seeded(seed));
        let bytes = storage.read(path("log")).unwrap();
        let expected = b"synced|0123456789";
        assert!(
            bytes.len() >= 7 && bytes.len() <= expected.len(),
            "seed {seed}"
        );
        assert_eq!(bytes, expected[..bytes.len()], "seed {seed}");
        lengths.insert(bytes.len());
    }
    // Both extremes and something in between occur.
    assert!(lengths.contains(&7) && lengths.contains(&17) && lengths.len() > 3);
}

#[test]
fn torn_writes_are_deterministic_per_seed() {
    let run = |seed| {
        let storage = SimulatedStorage::new();
        durable_file(&storage, "log", b"");
        let mut file = storage.open_append(path("log")).unwrap();
        file.append(&[7; 1000]).unwrap();
        storage.power_loss(TornWrites::Seeded(seed));
        storage.len(path("log")).unwrap()
    };
    assert_eq!(run(42), run(42));
}

/// A durable "synced|", then `pages` pages and a bit of unsynced bytes, none of them
/// zero; a power loss with `torn`. Returns the bytes before, after and the report.
fn tear_pages(torn: TornWrites, pages: usize) -> (Vec<u8>, Vec<u8>, TornFile) {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"synced|");
    let mut file = storage.open_append(path("log")).unwrap();
    let dirty: Vec<u8> = (0..pages * PAGE_BYTES + 100)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    file.append(&dirty).unwrap();
    let before = storage.read(path("log")).unwrap();
    let report = storage.power_loss(torn);
    assert_eq!(report.len(), 1);
    (
        before,
        storage.read(path("log")).unwrap(),
        report[0].clone(),
    )
}

/// What every torn file must look like: the synced bytes intact, the kept ranges as
/// written, zeros between them, nothing after the last.
fn check_tear(before: &[u8], after: &[u8], report: &TornFile, seed: u64) {
    assert_eq!((report.synced, report.written), (7, before.len() as u64));
    let end = report.kept.last().map_or(7, |r| r.end as usize);
    assert_eq!(after.len(), end, "seed {seed}");
    let mut kept = vec![false; after.len()];
    for range in &report.kept {
        assert!(range.start >= 7 && range.start < range.end, "seed {seed}");
        kept[range.start as usize..range.end as usize].fill(true);
    }
    for (i, byte) in after.iter().enumerate() {
        let expected = if i < 7 || kept[i] { before[i] } else { 0 };
        assert_eq!(*byte, expected, "seed {seed}, offset {i}");
    }
}

#[test]
fn holes_lose_pages_before_a_later_kept_one_and_read_as_zeros() {
    let mut holes = 0;
    for seed in 0..200 {
        let (before, after, report) = tear_pages(TornWrites::Hole(seed), 4);
        check_tear(&before, &after, &report, seed);
        // One hole at most: a kept prefix of pages, then one later run of pages.
        assert!(report.kept.len() <= 2, "seed {seed}: {report:?}");
        if report.has_hole() {
            holes += 1;
            let lost_from = match report.kept.first() {
                Some(range) if range.start == 7 => range.end,
                _ => 7,
            };
            assert!(lost_from == 7 || lost_from.is_multiple_of(PAGE_BYTES as u64));
        }
    }
    assert!(holes > 100, "{holes} holes in 200 seeds");
    // A single unsynced page is torn as a prefix.
    for seed in 0..50 {
        let (before, after, report) = tear_pages(TornWrites::Hole(seed), 0);
        check_tear(&before, &after, &report, seed);
        assert!(!report.has_hole());
    }
}

#[test]
fn scattered_pages_survive_in_any_order() {
    let (mut holes, mut runs) = (0, 0);
    for seed in 0..200 {
        let (before, after, report) = tear_pages(TornWrites::Scattered(seed), 5);
        check_tear(&before, &after, &report, seed);
        for range in &report.kept {
            let aligned = |at: u64| at.is_multiple_of(PAGE_BYTES as u64);
            assert!(range.start == 7 || aligned(range.start), "seed {seed}");
            assert!(
                range.end == report.written || aligned(range.end),
                "seed {seed}"
            );
        }
        holes += usize::from(report.has_hole());
        runs += usize::from(report.kept.len() > 2);
    }
    assert!(
        holes > 100 && runs > 10,
        "{holes} holes, {runs} with 3+ runs"
    );
    assert_eq!(
        tear_pages(TornWrites::Scattered(9), 5),
        tear_pages(TornWrites::Scattered(9), 5)
    );
}

#[test]
fn power_loss_reports_only_files_with_bytes_not_durable() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "synced", b"all durable");
    durable_file(&storage, "log", b"abc");
    storage
        .open_append(path("log"))
        .unwrap()
        .append(b"def")
        .unwrap();
    let report = storage.power_loss(TornWrites::None);
    assert_eq!(
        report,
        [TornFile {
            path: PathBuf::from("log"),
            synced: 3,
            written: 6,
            kept: Vec::new(),
        }]
    );
}

#[test]
fn a_paused_thread_waits_and_the_crash_at_its_step_follows_the_resume() {
    let storage = SimulatedStorage::new();
    let step = CrashPoint::RewriteDeletedOne.nth(2);
    storage.pause_at(step);
    storage.crash_at(step);
    let worker = {
        let storage = storage.clone();
        std::thread::spawn(move || {
            let storage: &dyn Storage = &storage;
            storage.checkpoint(CrashPoint::RewriteDeletedOne);
            storage.checkpoint(CrashPoint::RewriteDeletedOne);
            storage.create(path("after")).map(|_| ())
        })
    };
    while storage.checkpoints().len() < 2 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!worker.is_finished(), "the thread waits at step:2");
    // The crash is not in effect yet: others go on.
    storage.create(path("meanwhile")).unwrap();
    storage.resume();
    assert!(
        worker.join().unwrap().is_err(),
        "the crash follows the resume"
    );
}

#[test]
fn synced_paths_name_each_numbered_sync() {
    let storage = SimulatedStorage::new();
    storage.create_dir_all(path("d")).unwrap();
    let mut file = storage.create(path("d/f")).unwrap();
    file.sync_data().unwrap();
    storage.fail_sync(2, Fault::Io);
    assert!(storage.sync_dir(path("d")).is_err());
    file.sync_all().unwrap();
    assert_eq!(storage.counts().syncs, 3);
    let expected: Vec<PathBuf> = ["d/f", "d", "d/f"].iter().map(PathBuf::from).collect();
    assert_eq!(storage.synced_paths(), expected);
    let _ = storage.power_loss(TornWrites::None);
    assert!(storage.synced_paths().is_empty());
}

#[test]
fn a_durable_copy_is_a_storage_of_its_own() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "kept", b"durable");
    storage
        .open_append(path("kept"))
        .unwrap()
        .append(b"+live")
        .unwrap();
    storage.create(path("unnamed")).unwrap();
    let copy = storage.durable_copy();
    assert_eq!(copy.read(path("kept")).unwrap(), b"durable");
    assert_eq!(copy.list_dir(path("")).unwrap(), ["kept"]);
    copy.open_append(path("kept"))
        .unwrap()
        .append(b"!")
        .unwrap();
    assert_eq!(storage.read(path("kept")).unwrap(), b"durable+live");
    assert_eq!(storage.list_dir(path("")).unwrap(), ["kept", "unnamed"]);
}

#[test]
fn new_file_without_directory_sync_vanishes() {
    let storage = SimulatedStorage::new();
    let mut file = storage.create(path("new")).unwrap();
    file.append(b"data").unwrap();
    file.sync_all().unwrap();
    storage.power_loss(TornWrites::None);
    assert_eq!(
        storage.read(path("new")).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
}

#[test]
fn rename_is_lost_without_directory_sync() {
    let storage = SimulatedStorage::new();
    storage.create_dir_all(path("dir")).unwrap();
    storage.sync_dir(path("")).unwrap();
    durable_file(&storage, "dir/manifest", b"old");
    durable_file(&storage, "dir/manifest.tmp", b"new");
    storage
        .rename(path("dir/manifest.tmp"), path("dir/manifest"))
        .unwrap();
    assert_eq!(storage.read(path("dir/manifest")).unwrap(), b"new");
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("dir/manifest")).unwrap(), b"old");
    assert_eq!(
        storage.list_dir(path("dir")).unwrap(),
        ["manifest", "manifest.tmp"]
    );
}

#[test]
fn rename_is_kept_with_directory_sync() {
    let storage = SimulatedStorage::new();
    storage.create_dir_all(path("dir")).unwrap();
    storage.sync_dir(path("")).unwrap();
    durable_file(&storage, "dir/manifest", b"old");
    durable_file(&storage, "dir/manifest.tmp", b"new");
    storage
        .rename(path("dir/manifest.tmp"), path("dir/manifest"))
        .unwrap();
    storage.sync_dir(path("dir")).unwrap();
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("dir/manifest")).unwrap(), b"new");
    assert_eq!(storage.list_dir(path("dir")).unwrap(), ["manifest"]);
}

#[test]
fn remove_is_undone_without_directory_sync_and_kept_with_it() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "garbage", b"x");
    storage.remove_file(path("garbage")).unwrap();
    assert!(storage.list_dir(path("")).unwrap().is_empty());
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("garbage")).unwrap(), b"x");

    storage.remove_file(path("garbage")).unwrap();
    storage.sync_dir(path("")).unwrap();
    storage.power_loss(TornWrites::None);
    assert!(storage.list_dir(path("")).unwrap().is_empty());
}

#[test]
fn directory_not_synced_into_its_parent_loses_its_files() {
    let storage = SimulatedStorage::new();
    storage.create_dir_all(path("a/b")).unwrap();
    durable_file(&storage, "a/b/file", b"x");
    storage.sync_dir(path("a")).unwrap();
    // `a` itself was never made durable in the root.
    storage.power_loss(TornWrites::None);
    assert!(storage.list_dir(path("")).unwrap().is_empty());
    assert!(storage.read(path("a/b/file")).is_err());
}

#[test]
fn open_handle_survives_unlink_but_not_power_loss() {
    let storage = SimulatedStorage::new();
    let mut file = storage.create(path("f")).unwrap();
    storage.remove_file(path("f")).unwrap();
    file.append(b"still writable").unwrap();
    assert_eq!(file.len().unwrap(), 14);
    storage.power_loss(TornWrites::None);
    assert!(file.append(b"x").is_err());
    assert!(file.len().is_err());
}

#[test]
fn truncate_then_sync_is_durable_and_unsynced_truncate_is_not() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"0123456789");
    let mut file = storage.open_append(path("log")).unwrap();
    file.set_len(4).unwrap();
    assert_eq!(storage.read(path("log")).unwrap(), b"0123");
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("log")).unwrap(), b"0123456789");

    let mut file = storage.open_append(path("log")).unwrap();
    file.set_len(4).unwrap();
    file.append(b"ab").unwrap();
    file.sync_data().unwrap();
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("log")).unwrap(), b"0123ab");
}

#[test]
fn injected_write_failure_appends_nothing() {
    let storage = SimulatedStorage::new();
    let mut file = storage.create(path("log")).unwrap();
    storage.fail_write(2, Fault::NoSpace);
    file.append(b"one").unwrap();
    let error = file.append(b"two").unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::StorageFull);
    assert_eq!(error.raw_os_error(), Some(28));
    file.append(b"three").unwrap();
    assert_eq!(storage.read(path("log")).unwrap(), b"onethree");
    assert_eq!(storage.counts().writes, 3);
}

#[test]
fn failed_sync_drops_dirty_bytes_for_good() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"durable|");
    let syncs_before = storage.counts().syncs;
    storage.fail_sync(syncs_before + 1, Fault::Io);
    let mut file = storage.open_append(path("log")).unwrap();
    file.append(b"lost").unwrap();
    assert_eq!(file.sync_data().unwrap_err().raw_os_error(), Some(5));
    // A second sync succeeds but cannot write what the failed one dropped: the
    // length is durable, the bytes are a hole (zeros).
    file.sync_data().unwrap();
    storage.power_loss(TornWrites::None);
    assert_eq!(storage.read(path("log")).unwrap(), b"durable|\0\0\0\0");
}

#[test]
fn a_sync_after_the_crash_leaves_the_dirty_bytes_to_the_power_loss() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"durable|");
    let mut file = storage.open_append(path("log")).unwrap();
    file.append(b"in flight").unwrap();
    storage.crash_now();
    assert!(file.sync_data().is_err());
    let report = storage.power_loss(TornWrites::Seeded(7));
    assert_eq!((report[0].synced, report[0].written), (8, 17));
    let kept = report[0].kept.first().map_or(8, |r| r.end) as usize;
    assert_eq!(
        storage.read(path("log")).unwrap(),
        b"durable|in flight"[..kept]
    );
    assert!(kept > 8, "seed 7 keeps some of the bytes in flight");
}

#[test]
fn rewrite_after_failed_sync_makes_the_bytes_durable() {
    // The log writer's recovery: cut back to the durable length, append again, sync.
    let storage = SimulatedStorage::new();
    durable_file(&storage, "log", b"durable|");
    storage.fail_sync(storage.counts().syncs + 1, Fault::Io);
    let mut file = storage.open_append(path("log")).unwrap();
    file.append(b"batch").unwrap();
    assert!(file.sync_data().is_err());
    file.set_len(8).unwrap();
    file.append(b"batch").unwrap();
    file.sync_data().unwrap();
    storage.power_loss(TornWrites::Seeded(3));
    assert_eq!(storage.read(path("log")).unwrap(), b"durable|batch");
}

#[test]
fn failed_rename_changes_nothing() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "manifest", b"old");
    durable_file(&storage, "temp", b"new");
    storage.fail_rename(1, Fault::Io);
    assert!(storage.rename(path("temp"), path("manifest")).is_err());
    assert_eq!(storage.read(path("manifest")).unwrap(), b"old");
    assert_eq!(storage.read(path("temp")).unwrap(), b"new");
    storage.rename(path("temp"), path("manifest")).unwrap();
    assert_eq!(storage.read(path("manifest")).unwrap(), b"new");
}

#[test]
fn failed_directory_sync_makes_nothing_durable() {
    let storage = SimulatedStorage::new();
    let mut file = storage.create(path("f")).unwrap();
    file.sync_all().unwrap();
    storage.fail_sync(2, Fault::Io);
    assert!(storage.sync_dir(path("")).is_err());
    storage.power_loss(TornWrites::None);
    assert!(storage.list_dir(path("")).unwrap().is_empty());
}

#[test]
fn faults_by_name_hit_only_that_file_and_only_so_many_times() {
    let storage = SimulatedStorage::new();
    storage.fail_file_op(FileOp::Write, "log", Fault::NoSpace, 2);
    storage.fail_file_op(FileOp::Sync, "log", Fault::Io, 1);
    storage.fail_file_op(FileOp::Create, "temp-", Fault::Io, 1);
    storage.fail_file_op(FileOp::Rename, "temp-b", Fault::Io, 1);
    let mut other = storage.create(path("other")).unwrap();
    other.append(b"x").unwrap();
    other.sync_data().unwrap();
    let mut log = storage.create(path("dir-log")).unwrap();
    assert_eq!(log.append(b"a").unwrap_err().raw_os_error(), Some(28));
    assert!(log.append(b"b").is_err());
    log.append(b"c").unwrap();
    assert_eq!(log.sync_data().unwrap_err().raw_os_error(), Some(5));
    log.sync_data().unwrap();
    assert_eq!(storage.read(path("dir-log")).unwrap(), b"c");
    assert!(storage.create(path("temp-a")).is_err());
    assert!(storage.list_dir(path("")).unwrap() == ["dir-log", "other"]);
    storage.create(path("temp-b")).unwrap();
    assert!(storage.rename(path("temp-b"), path("b")).is_err());
    storage.rename(path("temp-b"), path("b")).unwrap();
    assert_eq!(storage.counts().writes, 4);
}

#[test]
fn every_operation_after_the_limit_fails() {
    let storage = SimulatedStorage::new();
    storage.fail_operations_after(2);
    let mut file = storage.create(path("f")).unwrap();
    file.append(b"x").unwrap();
    assert!(file.append(b"y").is_err());
    assert!(storage.read(path("f")).is_err());
    assert!(storage.sync_dir(path("")).is_err());
    storage.clear_faults();
    assert_eq!(storage.read(path("f")).unwrap(), b"x");
}

#[test]
fn frozen_durability_crashes_at_sync_number_n() {
    // The commit protocol, with every crash point taken in turn.
    let commit = |storage: &SimulatedStorage| {
        durable_file(storage, "manifest", b"v1");
        let mut temp = storage.create(path("manifest.tmp")).unwrap();
        temp.append(b"v2").unwrap();
        temp.sync_all().unwrap();
        storage
            .rename(path("manifest.tmp"), path("manifest"))
            .unwrap();
        storage.sync_dir(path("")).unwrap();
    };
    let total = {
        let storage = SimulatedStorage::new();
        commit(&storage);
        storage.counts().syncs
    };
    assert_eq!(total, 4);
    let mut seen = Vec::new();
    for syncs in 0..=total {
        let storage = SimulatedStorage::new();
        storage.freeze_durability_after_syncs(syncs);
        commit(&storage);
        storage.power_loss(TornWrites::None);
        seen.push(storage.read(path("manifest")).ok());
    }
    let v1 = Some(b"v1".to_vec());
    let v2 = Some(b"v2".to_vec());
    assert_eq!(seen, [None, None, v1.clone(), v1, v2]);
}

#[test]
fn list_dir_and_create_dir_all() {
    let storage = SimulatedStorage::new();
    storage.create_dir_all(path("./d/e")).unwrap();
    storage.create(path("d/z")).unwrap();
    storage.create(path("d/a")).unwrap();
    assert_eq!(storage.list_dir(path("d")).unwrap(), ["a", "e", "z"]);
    assert!(storage.create(path("missing/f")).is_err());
    assert!(storage.create_dir_all(path("d/a/x")).is_err());
    assert!(storage.list_dir(path("missing")).is_err());
}

#[test]
fn read_only_handle_refuses_appends() {
    let storage = SimulatedStorage::new();
    durable_file(&storage, "f", b"abc");
    let mut file = storage.open_read(path("f")).unwrap();
    assert!(file.append(b"x").is_err());
    let mut buffer = [0; 8];
    assert_eq!(file.read_at(1, &mut buffer).unwrap(), 2);
    assert_eq!(&buffer[..2], b"bc");
    assert_eq!(file.read_at(10, &mut buffer).unwrap(), 0);
}

/// The same script on both implementations must read back the same.
fn round_trip(storage: &dyn Storage) {
    storage.create_dir_all(path("dir/sub")).unwrap();
    let mut file = storage.create(path("dir/log")).unwrap();
    file.append(b"hello ").unwrap();
    write!(file, "world").unwrap();
    file.sync_data().unwrap();
    assert_eq!(file.len().unwrap(), 11);
    file.set_len(5).unwrap();
    file.append(b"!").unwrap();
    file.sync_all().unwrap();
    drop(file);
    assert_eq!(storage.read(path("dir/log")).unwrap(), b"hello!");
    assert_eq!(storage.len(path("dir/log")).unwrap(), 6);

    let mut file = storage.open_append(path("dir/log")).unwrap();
    file.append(b"?").unwrap();
    let mut reader = StorageReader::new(storage.open_read(path("dir/log")).unwrap());
    let mut text = String::new();
    reader.read_to_string(&mut text).unwrap();
    assert_eq!(text, "hello!?");
    assert_eq!(reader.offset(), 7);

    storage
        .create(path("dir/temp"))
        .unwrap()
        .append(b"new")
        .unwrap();
    storage.rename(path("dir/temp"), path("dir/log")).unwrap();
    storage.sync_dir(path("dir")).unwrap();
    assert_eq!(storage.read(path("dir/log")).unwrap(), b"new");
    assert_eq!(storage.list_dir(path("dir")).unwrap(), ["log", "sub"]);
    storage.remove_file(path("dir/log")).unwrap();
    assert_eq!(
        storage.read(path("dir/log")).unwrap_err().kind(),
        io::ErrorKind::NotFound
    );
    assert_eq!(storage.list_dir(path("dir")).unwrap(), ["sub"]);
    // Creating over an existing file truncates it.
    storage
        .create(path("dir/f"))
        .unwrap()
        .append(b"long")
        .unwrap();
    storage.create(path("dir/f")).unwrap();
    assert_eq!(storage.len(path("dir/f")).unwrap(), 0);
}

#[test]
fn real_storage_round_trips() {
    let root = tempfile::tempdir().unwrap();
    round_trip(&RealStorage::new(root.path()));
}

#[test]
fn simulated_storage_round_trips() {
    round_trip(&SimulatedStorage::new());
}

#[test]
fn storage_is_usable_as_a_shared_trait_object() {
    let storage: Arc<dyn Storage> = Arc::new(SimulatedStorage::new());
    let writer = {
        let storage = Arc::clone(&storage);
        std::thread::spawn(move || {
            let mut file = storage.create(path("log")).unwrap();
            file.append(b"from a thread").unwrap();
            file.sync_data().unwrap();
        })
    };
    writer.join().unwrap();
    assert_eq!(storage.read(path("log")).unwrap(), b"from a thread");
}
