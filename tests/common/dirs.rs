//! Data directories as tests see them: the files of a directory with their bytes, and the
//! string keys a server holds.

use std::collections::BTreeMap;
use std::path::Path;

/// Every file of `dir` with its bytes.
pub fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Every key of the selected database with its value (for tests that write only strings).
pub fn string_keys(conn: &mut redis::Connection) -> BTreeMap<String, String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
    keys.into_iter()
        .map(|key| {
            let value: String = redis::cmd("GET").arg(&key).query(conn).unwrap();
            (key, value)
        })
        .collect()
}

/// The names in `dir` (directories too), sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
