//! The writer and its fsync thread on a simulated disk: writes that go on while a sync
//! runs, the 2 s stall limit, pipelined group commit, and a failing sync while writes go
//! on. The sync delay stands for a slow disk; every assertion is about the order of
//! events, with seconds of margin, never about how fast anything is.

use super::*;
use crate::storage::{Fault, SimulatedStorage, TornWrites};
use std::path::Path;
use std::time::Instant;

const LOG: &str = "log.aof";

fn start(storage: &SimulatedStorage, policy: FsyncPolicy) -> LogWriter {
    let shared: Arc<dyn Storage> = Arc::new(storage.clone());
    let file = shared.create(Path::new(LOG)).unwrap();
    shared.sync_dir(Path::new("")).unwrap();
    LogWriter::start(shared, file, 0, policy, Arc::new(|| {}))
}

fn submit(writer: &mut LogWriter, text: &str) -> u64 {
    writer.submit(&mut text.as_bytes().to_vec())
}

/// Waits until `done` holds (10 s at most) and returns what `observe` saw at that moment.
fn wait_for<T>(what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(seen) = done() {
            return seen;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn durable_text(storage: &SimulatedStorage) -> String {
    let after = storage.durable_copy();
    String::from_utf8(after.read(Path::new(LOG)).unwrap()).unwrap()
}

/// Under `everysec` a batch submitted while an fsync runs is written (and its replies may
/// go) before that fsync returns; once the fsync has run for more than 2 s, writes wait
/// for it and `aof_delayed_fsync` counts the stall.
#[test]
fn everysec_writes_go_on_during_an_fsync_until_it_stalls_past_two_seconds() {
    let storage = SimulatedStorage::new();
    let mut writer = start(&storage, FsyncPolicy::EverySec);
    storage.set_sync_delay(Duration::from_secs(5));
    let started = Instant::now();
    submit(&mut writer, "one\n");
    wait_for("batch 1 written", || {
        (writer.written_seq() == 1).then_some(())
    });

    // The first fsync starts about 1 s after the writer and returns about 5 s later.
    std::thread::sleep(Duration::from_millis(1500).saturating_sub(started.elapsed()));
    submit(&mut writer, "two\n");
    let durable_then = wait_for("batch 2 written", || {
        (writer.written_seq() == 2).then(|| writer.durable_seq())
    });
    assert_eq!(durable_then, 0, "batch 2 waited for the running fsync");
    assert_eq!(writer.delayed_fsyncs(), 0);

    // Past the 2 s limit: the next batch is held until the fsync returns.
    std::thread::sleep(Duration::from_millis(4000).saturating_sub(started.elapsed()));
    submit(&mut writer, "three\n");
    let durable_then = wait_for("batch 3 written", || {
        (writer.written_seq() == 3).then(|| writer.durable_seq())
    });
    assert!(
        durable_then >= 1,
        "batch 3 was written while an fsync past the stall limit still ran"
    );
    assert_eq!(writer.delayed_fsyncs(), 1);
    storage.set_sync_delay(Duration::ZERO);
    writer.sync().unwrap();
    assert_eq!(durable_text(&storage), "one\ntwo\nthree\n");
}

/// Under `always` the batches submitted while a sync runs are written meanwhile, and the
/// next sync covers them all (group commit, pipelined).
#[test]
fn always_writes_the_next_batches_while_a_sync_runs() {
    let storage = SimulatedStorage::new();
    let mut writer = start(&storage, FsyncPolicy::Always);
    storage.set_sync_delay(Duration::from_millis(1500));
    let syncs_before = storage.counts().syncs;
    submit(&mut writer, "a\n");
    wait_for("batch 1 written", || {
        (writer.written_seq() == 1).then_some(())
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut last = 0;
    for text in ["b\n", "c\n", "d\n"] {
        last = submit(&mut writer, text);
    }
    let durable_then = wait_for("batches 2-4 written", || {
        (writer.written_seq() == last).then(|| writer.durable_seq())
    });
    assert_eq!(durable_then, 0, "the batches waited for the running sync");
    // Written, not durable: kept in memory for a rewrite (INFO mem_aof_buffer, which
    // counts the batches' capacity: at least their 8 bytes).
    assert!(writer.buffered_bytes() >= 8);
    wait_for("all durable", || {
        (writer.durable_seq() == last).then_some(())
    });
    assert_eq!(durable_text(&storage), "a\nb\nc\nd\n");
    wait_for("the kept batches dropped", || {
        (writer.buffered_bytes() == 0).then_some(())
    });
    // One sync for batch 1, one for the three written during it.
    assert_eq!(storage.counts().syncs - syncs_before, 2);
}

/// An fsync of the fsync thread fails while batches go on arriving: writes are refused
/// (the error is published), the writer cuts the untrusted bytes, rewrites them from
/// memory and heals; nothing submitted is lost, even to a power loss after the next sync.
#[test]
fn a_failing_fsync_while_writes_go_on_is_recovered_from_memory() {
    let storage = SimulatedStorage::new();
    let mut writer = start(&storage, FsyncPolicy::Always);
    storage.set_sync_delay(Duration::from_millis(200));
    let mut expected = String::new();
    let next = |writer: &mut LogWriter, expected: &mut String| {
        let text = format!("record {}\n", expected.lines().count());
        expected.push_str(&text);
        submit(writer, &text)
    };
    next(&mut writer, &mut expected);
    wait_for("durable", || (writer.durable_seq() == 1).then_some(()));
    storage.fail_file_op(crate::storage::FileOp::Sync, LOG, Fault::Io, 1);
    let mut saw_error = false;
    for _ in 0..30 {
        next(&mut writer, &mut expected);
        saw_error |= writer.error().is_some();
        std::thread::sleep(Duration::from_millis(20));
    }
    let last = next(&mut writer, &mut expected);
    saw_error |= wait_for("the failure or the end", || {
        if writer.error().is_some() {
            Some(true)
        } else {
            (writer.durable_seq() == last).then_some(false)
        }
    });
    assert!(saw_error, "the failed fsync was never published");
    wait_for("healed", || {
        (writer.error().is_none() && writer.durable_seq() == last).then_some(())
    });
    storage.set_sync_delay(Duration::ZERO);
    drop(writer);
    storage.power_loss(TornWrites::None);
    let text = String::from_utf8(storage.read(Path::new(LOG)).unwrap()).unwrap();
    assert_eq!(text, expected);
}
