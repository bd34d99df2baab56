//! Damaged files at start-up: the server refuses, naming the file and the offset, and
//! changes nothing on disk. Only the LAST incremental file may end in a torn record (a
//! crash during a write, cut off with a warning): an earlier file that ends inside a
//! record or a MULTI block lost records the later files depend on. A base part cut short
//! or with a damaged byte, or an incremental file the manifest lists but that is gone, is
//! refused the same way. (`manifest_damage.rs` covers a missing base part and a damaged
//! manifest.)

mod common;

use common::dirs::{contents, string_keys};
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MANIFEST: &str = "appendonly.aof.manifest";

fn aof_dir(dir: &Path) -> PathBuf {
    dir.join("appendonlydir")
}

/// One RESP record.
fn record(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

fn records(list: &[&[&str]]) -> Vec<u8> {
    list.iter().flat_map(|args| record(args)).collect()
}

/// A log directory of incremental files only, written by hand: the manifest lists them
/// in order.
fn log_dir(files: &[Vec<u8>]) -> tempfile::TempDir {
    let dir = temp_dir();
    let aof = aof_dir(dir.path());
    std::fs::create_dir_all(&aof).unwrap();
    let mut manifest = String::new();
    for (index, bytes) in files.iter().enumerate() {
        let seq = index + 1;
        let name = format!("appendonly.aof.{seq}.incr.aof");
        std::fs::write(aof.join(&name), bytes).unwrap();
        manifest.push_str(&format!("file {name} seq {seq} type i\n"));
    }
    std::fs::write(aof.join(MANIFEST), manifest).unwrap();
    dir
}

/// Starts the server on `dir`, which must refuse: returns what it printed. The log
/// directory must be unchanged.
fn expect_refusal(dir: &Path, case: &str) -> String {
    let before = contents(&aof_dir(dir));
    let output = match try_start_server(dir, &["--save", ""]) {
        Ok(server) => {
            let keys = dbsize(&mut server.connection());
            panic!("{case}: the server started, with {keys} keys")
        }
        Err(output) => output,
    };
    assert!(!output.contains("panicked"), "{case}: {output}");
    assert_eq!(
        contents(&aof_dir(dir)),
        before,
        "{case}: refusing changed the directory"
    );
    output
}

#[test]
fn a_torn_record_is_cut_only_in_the_last_incremental_file() {
    let whole = records(&[&["SELECT", "0"], &["SET", "a", "1"], &["SET", "b", "2"]]);
    let torn_record = &record(&["SET", "c", "torn value"])[..20];
    let mut torn = whole.clone();
    torn.extend_from_slice(torn_record);
    let later = records(&[&["SELECT", "0"], &["SET", "d", "4"]]);

    // In the first of two files: refused, naming the file and the record's offset.
    let dir = log_dir(&[torn.clone(), later.clone()]);
    let output = expect_refusal(dir.path(), "torn record in the first file");
    assert!(
        output.contains(&format!(
            "appendonly.aof.1.incr.aof: it ends inside a record at offset {}",
            whole.len()
        )) && output.contains("not the last file"),
        "{output}"
    );

    // In the last file: a crash during a write; the record is cut off with a warning.
    let dir = log_dir(&[later.clone(), torn.clone()]);
    let server = start_server(dir.path(), &["--save", ""]);
    let loaded = string_keys(&mut server.connection());
    let expected: BTreeMap<String, String> = [("a", "1"), ("b", "2"), ("d", "4")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(loaded, expected);
    assert!(server.log().contains("cutting off the last 20 bytes"));
    drop(server);
    assert_eq!(
        std::fs::read(aof_dir(dir.path()).join("appendonly.aof.2.incr.aof")).unwrap(),
        whole
    );
}

#[test]
fn a_transaction_cut_short_is_refused_unless_in_the_last_file() {
    // Complete records, but the file ends inside MULTI … EXEC: the transaction's other
    // half is lost, so the file is torn at its MULTI.
    let before_multi = records(&[&["SELECT", "0"], &["SET", "a", "1"]]);
    let mut open_block = before_multi.clone();
    open_block.extend(records(&[&["MULTI"], &["SET", "x", "1"], &["INCR", "a"]]));
    let later = records(&[&["SELECT", "0"], &["SET", "d", "4"]]);
    let dir = log_dir(&[open_block.clone(), later.clone()]);
    let output = expect_refusal(dir.path(), "open MULTI in the first file");
    assert!(
        output.contains(&format!(
            "appendonly.aof.1.incr.aof: it ends inside a record at offset {}",
            before_multi.len()
        )),
        "{output}"
    );
    // The last file: the whole transaction is cut off, nothing of it applied.
    let dir = log_dir(&[later, open_block]);
    let server = start_server(dir.path(), &["--save", ""]);
    let loaded = string_keys(&mut server.connection());
    assert_eq!(loaded.get("a").map(String::as_str), Some("1"));
    assert_eq!(loaded.get("x"), None);
}

/// A directory written by the real server: base parts of a compaction with 3 writer
/// threads, then records in the incremental file after it.
fn compacted_dir() -> (tempfile::TempDir, BTreeMap<String, String>) {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--aof-rewrite-threads", "3"]);
    let mut conn = server.connection();
    let mut pipe = redis::pipe();
    for i in 0..600 {
        pipe.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("value {i} {}", "v".repeat(i % 40)))
            .ignore();
    }
    let _: () = pipe.query(&mut conn).unwrap();
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_for_background_jobs(&mut conn);
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("compaction")
        .query(&mut conn)
        .unwrap();
    let expected = string_keys(&mut conn);
    server.shutdown();
    (dir, expected)
}

/// A copy of a data directory's log directory in a new data directory.
fn copy_of(dir: &Path) -> tempfile::TempDir {
    let copy = temp_dir();
    let aof = aof_dir(copy.path());
    std::fs::create_dir_all(&aof).unwrap();
    for (name, bytes) in contents(&aof_dir(dir)) {
        std::fs::write(aof.join(name), bytes).unwrap();
    }
    copy
}

#[test]
fn a_damaged_base_part_or_a_missing_incremental_file_is_refused_naming_it() {
    let (original, expected) = compacted_dir();
    let files = contents(&aof_dir(original.path()));
    let part = "appendonly.aof.1.base.2.rdb";
    let part_bytes = files[part].clone();
    assert!(
        part_bytes.len() > 1000,
        "part 2 holds keys: {} bytes",
        part_bytes.len()
    );
    let damaged_part = |bytes: Vec<u8>| {
        let copy = copy_of(original.path());
        std::fs::write(aof_dir(copy.path()).join(part), bytes).unwrap();
        copy
    };

    // Cut short (as a part written without its fsync would be after a power loss).
    let cut = part_bytes.len() / 2;
    let copy = damaged_part(part_bytes[..cut].to_vec());
    let output = expect_refusal(copy.path(), "part cut short");
    assert!(
        output.contains(&format!("{part}: corrupt RDB file at offset {cut}")),
        "{output}"
    );

    // One byte of a value changed: only the checksum can tell, at the end of the part.
    let mut flipped = part_bytes.clone();
    let at = flipped
        .windows(6)
        .position(|w| w == b"value ")
        .expect("a value in the part");
    flipped[at] ^= 0x20;
    let copy = damaged_part(flipped);
    let output = expect_refusal(copy.path(), "a byte flipped in a value");
    assert!(
        output.contains(&format!(
            "{part}: wrong RDB checksum (RDB CRC error) at offset {}",
            part_bytes.len() - 8
        )),
        "{output}"
    );

    // An empty part (created, never written): no RDB signature at offset 0.
    let copy = damaged_part(Vec::new());
    let output = expect_refusal(copy.path(), "an empty part");
    assert!(
        output.contains(&format!("{part}: not an RDB file")),
        "{output}"
    );

    // The incremental file the manifest lists is gone.
    let copy = copy_of(original.path());
    std::fs::remove_file(aof_dir(copy.path()).join("appendonly.aof.2.incr.aof")).unwrap();
    let output = expect_refusal(copy.path(), "incremental file missing");
    assert!(
        output.contains("lists files that do not exist: appendonly.aof.2.incr.aof"),
        "{output}"
    );

    // The undamaged directory loads every key.
    let server = start_server(original.path(), &["--save", ""]);
    assert_eq!(string_keys(&mut server.connection()), expected);
}

#[test]
fn a_missing_incremental_file_between_others_is_refused_naming_it() {
    let dir = log_dir(&[
        records(&[&["SELECT", "0"], &["SET", "a", "1"]]),
        records(&[&["SELECT", "0"], &["INCR", "a"]]),
        records(&[&["SELECT", "0"], &["INCR", "a"]]),
    ]);
    std::fs::remove_file(aof_dir(dir.path()).join("appendonly.aof.2.incr.aof")).unwrap();
    let output = expect_refusal(dir.path(), "middle incremental file missing");
    assert!(
        output.contains("lists files that do not exist: appendonly.aof.2.incr.aof"),
        "{output}"
    );
}
