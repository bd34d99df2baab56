//! `tessera-check-aof [--fix] <manifest | file.aof>`: finds the first bad offset of the
//! append-only log and, with `--fix`, cuts the log there after confirmation (as
//! `redis-check-aof`). With a manifest, every listed incremental file is checked in order;
//! only the last one can be fixed, since cutting an earlier file would drop the later ones.

use clap::Parser;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use tessera::log::manifest::Manifest;
use tessera::recovery::{LogDamage, scan_records};

#[derive(Parser)]
#[command(
    version,
    about = "Check (and with --fix, repair) a Tessera/Redis append-only log"
)]
struct Args {
    /// Cut the damaged file at the first bad offset (asks for confirmation).
    #[arg(long)]
    fix: bool,
    /// Answer yes to the confirmation (for scripts).
    #[arg(long, short = 'y')]
    yes: bool,
    /// The manifest (`appendonly.aof.manifest`) or a single `.aof` file.
    file: PathBuf,
}

/// Outcome of checking one file.
struct FileCheck {
    size: u64,
    valid_up_to: u64,
    damage: Option<LogDamage>,
}

fn check_file(path: &Path) -> Result<FileCheck, String> {
    let size = std::fs::metadata(path)
        .map_err(|e| format!("Cannot open file {}: {e}", path.display()))?
        .len();
    let result = scan_records(
        &tessera::storage::RealStorage::new(""),
        path,
        |_args, _offset| Ok(()),
    );
    Ok(match result {
        Ok(end) => FileCheck {
            size,
            valid_up_to: end,
            damage: None,
        },
        Err((damage, _)) => {
            let valid_up_to = match &damage {
                LogDamage::Truncated { offset } | LogDamage::Corrupt { offset, .. } => *offset,
            };
            FileCheck {
                size,
                valid_up_to,
                damage: Some(damage),
            }
        }
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

fn run(args: &Args) -> Result<bool, String> {
    let is_manifest = args
        .file
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".manifest"));
    let files: Vec<PathBuf> = if is_manifest {
        let bytes = std::fs::read(&args.file)
            .map_err(|e| format!("Cannot open file {}: {e}", args.file.display()))?;
        let manifest =
            Manifest::parse(&bytes).map_err(|e| format!("{}: {e}", args.file.display()))?;
        let dir = args.file.parent().unwrap_or(Path::new("."));
        println!("Start checking Multi Part AOF");
        if manifest.base().next().is_some() {
            println!("Base snapshot files are not checked by this version (use redis-check-rdb).");
        }
        manifest.incremental().map(|e| dir.join(&e.name)).collect()
    } else {
        vec![args.file.clone()]
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
            .map_err(|e| format!("Cannot open {} for writing: {e}", path.display()))?;
        file.set_len(check.valid_up_to)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("Failed to truncate AOF {name}: {e}"))?;
        println!("Successfully truncated AOF {name}");
    }
    Ok(true)
}

fn main() {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(1);
        }
    }
}
