//! `tessera-check-aof [--fix] <manifest | file.aof>`: finds the first bad offset of the
//! append-only log and, with `--fix`, cuts the log there after confirmation (as
//! `redis-check-aof`). With a manifest, every listed incremental file is checked in order;
//! only the last one can be fixed, since cutting an earlier file would drop the later ones.
//!
//! `tessera-check-aof --rebuild-manifest [-y] <dir>`: writes a new manifest for the log files in
//! `dir` (when the server refuses to start because its manifest is missing, damaged or
//! older than the files), after printing what it decided for each file and why and asking
//! for confirmation. The decisions are `log::rebuild`'s; an existing manifest is kept as
//! `<name>.manifest.bak` first.
//!
//! Exit status 0 when the log is valid (or was repaired, or the manifest written), 1
//! otherwise; a `CheckError` (a file that can't be read or written) is printed on stderr.

use clap::Parser;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use tessera::log::LogPaths;
use tessera::log::manifest::{CommitError, FileKind, Manifest, ManifestError};
use tessera::log::rebuild::RebuildError;
use tessera::log::scan::{LogDamage, check_records};
use tessera::storage::{RealStorage, Storage};

/// Why the check, the repair or the rebuild could not go on (printed on stderr).
#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error("Cannot open file {}: {source}", path.display())]
    OpenFile { path: PathBuf, source: io::Error },
    #[error("Cannot read the directory {}: {source}", dir.display())]
    ReadDir { dir: PathBuf, source: io::Error },
    /// The log's appendfilename can't be told from the names in the directory.
    #[error(transparent)]
    BaseName(RebuildError),
    #[error(
        "{}: {source}\n(to write a new manifest from the files in its directory, use \
         --rebuild-manifest <dir>)",
        path.display()
    )]
    BadManifest {
        path: PathBuf,
        source: ManifestError,
    },
    #[error("Cannot keep the old manifest as {}: {source}", backup.display())]
    KeepOldManifest { backup: PathBuf, source: io::Error },
    #[error("Cannot write {}: {source}", path.display())]
    WriteManifest { path: PathBuf, source: CommitError },
    #[error("Cannot open {} for writing: {source}", path.display())]
    OpenForWriting { path: PathBuf, source: io::Error },
    #[error("Failed to truncate AOF {name}: {source}")]
    Truncate { name: String, source: io::Error },
}

#[derive(Parser)]
#[command(
    version,
    about = "Check (and with --fix, repair) a Tessera/Redis append-only log"
)]
struct Args {
    /// Cut the damaged file at the first bad offset (asks for confirmation).
    #[arg(long, conflicts_with = "rebuild_manifest")]
    fix: bool,
    /// Rebuild the manifest of the log directory given as FILE from the files in it
    /// (asks for confirmation).
    #[arg(long)]
    rebuild_manifest: bool,
    /// With --rebuild-manifest: the sequence number of the first incremental file after
    /// the base, when the files can't tell it.
    #[arg(long, value_name = "SEQ", requires = "rebuild_manifest")]
    first_incr: Option<u64>,
    /// With --rebuild-manifest: the log's appendfilename, when the files can't tell it.
    #[arg(long, value_name = "NAME", requires = "rebuild_manifest")]
    appendfilename: Option<String>,
    /// Answer yes to the confirmation (for scripts).
    #[arg(long, short = 'y')]
    yes: bool,
    /// The manifest (`appendonly.aof.manifest`) or a single `.aof` file; with
    /// --rebuild-manifest, the log directory (`appendonlydir`).
    file: PathBuf,
}

/// Outcome of checking one file.
struct FileCheck {
    size: u64,
    valid_up_to: u64,
    damage: Option<LogDamage>,
}

fn check_file(path: &Path) -> Result<FileCheck, CheckError> {
    let size = std::fs::metadata(path)
        .map_err(|source| CheckError::OpenFile {
            path: path.to_path_buf(),
            source,
        })?
        .len();
    Ok(match check_records(&RealStorage::new(""), path) {
        Ok(end) => FileCheck {
            size,
            valid_up_to: end,
            damage: None,
        },
        Err(damage) => FileCheck {
            size,
            valid_up_to: damage.offset(),
            damage: Some(damage),
        },
    })
}

fn confirm(question: &str, assume_yes: bool) -> bool {
    print!("{question} Continue? [y/N]: ");
    let _ = std::io::stdout().flush();
    if assume_yes {
        println!("y");
        return true;
    }
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer.trim().eq_ignore_ascii_case("y")
}

/// `--rebuild-manifest`: decide, show, confirm, keep the old manifest, commit.
fn rebuild_manifest(dir: &Path, args: &Args) -> Result<bool, CheckError> {
    let storage = RealStorage::new("");
    let names = storage
        .list_dir(dir)
        .map_err(|source| CheckError::ReadDir {
            dir: dir.to_path_buf(),
            source,
        })?;
    let base_name = match &args.appendfilename {
        Some(name) => name.clone(),
        None => tessera::log::rebuild::infer_base_name(&names).map_err(CheckError::BaseName)?,
    };
    let paths = LogPaths {
        dir: dir.to_path_buf(),
        base_name,
    };
    println!(
        "Rebuilding the manifest of the log '{}' in {}",
        paths.base_name,
        dir.display()
    );
    let rebuild = tessera::log::rebuild::rebuild(&storage, &paths, args.first_incr);
    for decision in &rebuild.decisions {
        let verdict = match decision.listed {
            Some(FileKind::Base) => "base",
            Some(FileKind::Incremental) => "incr",
            Some(FileKind::History) => "hist",
            None => "----",
        };
        println!("  [{verdict}] {}: {}", decision.name, decision.reason);
    }
    let manifest = match rebuild.result {
        Ok(manifest) => manifest,
        Err(error) => {
            println!("Cannot rebuild the manifest: {error}");
            return Ok(false);
        }
    };
    println!("The new manifest {}:", paths.manifest_name());
    print!("{}", manifest.to_text());
    let manifest_path = paths.manifest_path();
    let backup = if manifest_path.exists() {
        let backup = free_name(&dir.join(format!("{}.bak", paths.manifest_name())));
        println!(
            "The current manifest will be kept as {}.",
            backup.file_name().unwrap_or_default().to_string_lossy()
        );
        Some(backup)
    } else {
        None
    };
    if !confirm("This writes the manifest above.", args.yes) {
        println!("Aborting...");
        return Ok(false);
    }
    if let Some(backup) = backup {
        std::fs::copy(&manifest_path, &backup)
            .and_then(|_| std::fs::File::open(&backup)?.sync_all())
            .map_err(|source| CheckError::KeepOldManifest { backup, source })?;
    }
    paths
        .commit_manifest(&storage, &manifest)
        .map_err(|source| CheckError::WriteManifest {
            path: manifest_path.clone(),
            source,
        })?;
    println!("Successfully wrote {}", manifest_path.display());
    Ok(true)
}

/// `path`, or `path.2`, `path.3` … : the first that does not exist.
fn free_name(path: &Path) -> PathBuf {
    let mut candidate = path.to_path_buf();
    let mut n = 1;
    while candidate.exists() {
        n += 1;
        candidate = PathBuf::from(format!("{}.{n}", path.display()));
    }
    candidate
}

fn run(args: &Args) -> Result<bool, CheckError> {
    if args.rebuild_manifest {
        return rebuild_manifest(&args.file, args);
    }
    let file = &args.file;
    let is_manifest = file
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".manifest"));
    let files: Vec<PathBuf> = if is_manifest {
        let bytes = std::fs::read(file).map_err(|source| CheckError::OpenFile {
            path: file.clone(),
            source,
        })?;
        let manifest = Manifest::parse(&bytes).map_err(|source| CheckError::BadManifest {
            path: file.clone(),
            source,
        })?;
        let dir = file.parent().unwrap_or(Path::new("."));
        println!("Start checking Multi Part AOF");
        if manifest.base().next().is_some() {
            println!("Base snapshot files are not checked by this version (use redis-check-rdb).");
        }
        manifest.incremental().map(|e| dir.join(&e.name)).collect()
    } else {
        vec![file.clone()]
    };
    for (index, path) in files.iter().enumerate() {
        let is_last = index + 1 == files.len();
        let check = check_file(path)?;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        println!(
            "AOF analyzed: filename={name}, size={}, ok_up_to={}, diff={}",
            check.size,
            check.valid_up_to,
            check.size - check.valid_up_to
        );
        let Some(damage) = check.damage else {
            println!("AOF {name} is valid");
            continue;
        };
        match &damage {
            LogDamage::Truncated { offset } => {
                println!("AOF {name}: the last record is incomplete (starts at offset {offset})")
            }
            LogDamage::Corrupt { offset, reason } => {
                println!("AOF {name}: bad format at offset {offset}: {reason}")
            }
        }
        if !args.fix {
            println!("AOF {name} is not valid. Use the --fix option to try fixing it.");
            return Ok(false);
        }
        if !is_last {
            println!(
                "AOF {name} is not the last file of the manifest; it can't be cut without losing the files after it. Restore it from a backup."
            );
            return Ok(false);
        }
        let question = format!(
            "This will shrink the AOF {name} from {} bytes, with {} bytes, to {} bytes.",
            check.size,
            check.size - check.valid_up_to,
            check.valid_up_to
        );
        if !confirm(&question, args.yes) {
            println!("Aborting...");
            return Ok(false);
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|source| CheckError::OpenForWriting {
                path: path.clone(),
                source,
            })?;
        file.set_len(check.valid_up_to)
            .and_then(|()| file.sync_all())
            .map_err(|source| CheckError::Truncate {
                name: name.to_string(),
                source,
            })?;
        println!("Successfully truncated AOF {name}");
    }
    Ok(true)
}

fn main() {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(1);
        }
    }
}
