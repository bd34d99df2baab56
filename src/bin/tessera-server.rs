//! `tessera-server [config-file] [--directive value ...]`

use tessera::config::Config;

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const USAGE: &str = "Usage: tessera-server [/path/to/tessera.conf] [options]
       tessera-server - (read config from stdin)
       tessera-server -v or --version
       tessera-server -h or --help

Options are configuration directives with two leading dashes, as in redis-server:
       tessera-server --port 7777 --dir ./data --appendfsync always
       tessera-server tessera.conf --loglevel verbose

Defaults: port 6379 on 127.0.0.1 and ::1, the append-only log on (appendonly yes,
appendfsync everysec) in <dir>/appendonlydir. See tessera.conf for every directive.";

/// The `logfile` can't be opened (printed on stderr before the process exits).
#[derive(Debug, thiserror::Error)]
#[error("can't open the log file {path}: {source}")]
struct LogFileError {
    path: String,
    source: std::io::Error,
}

fn init_logging(config: &Config) -> Result<(), LogFileError> {
    use tracing_subscriber::prelude::*;
    // The level is read for every line: CONFIG SET loglevel changes it at run time.
    tessera::server_log::apply(&config.loglevel);
    // A dynamic filter: asked for every event, never cached per call site.
    let filter = tracing_subscriber::filter::dynamic_filter_fn(|meta, _| {
        tessera::server_log::enabled(meta.level())
    });
    let layer = tracing_subscriber::fmt::layer().with_target(false);
    if config.logfile.is_empty() {
        // Colours only for a terminal: a log captured to a file gets plain text.
        let layer = layer.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
        tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .init();
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.logfile)
            .map_err(|source| LogFileError {
                path: config.logfile.clone(),
                source,
            })?;
        let layer = layer
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file));
        tracing_subscriber::registry()
            .with(layer.with_filter(filter))
            .init();
    }
    Ok(())
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return;
        }
        Some("-v" | "--version") => {
            println!(
                "Tessera server v={} (Redis 7.0.15 compatible)",
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        _ => {}
    }
    // The config file CONFIG REWRITE rewrites and INFO names; none when the
    // configuration comes from standard input, as in redis-server.
    let mut config_file = String::new();
    if args.first().is_some_and(|a| !a.starts_with("--")) {
        if args[0] != "-" {
            config_file = std::fs::canonicalize(&args[0])
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| args[0].clone());
        }
        if args[0] == "-" {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut text);
            let path =
                std::env::temp_dir().join(format!("tessera-stdin-{}.conf", std::process::id()));
            let _ = std::fs::write(&path, text);
            args[0] = path.display().to_string();
        }
    }
    let mut config = match Config::from_args(&args) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(1);
        }
    };
    if let Err(error) = init_logging(&config) {
        eprintln!("{error}");
        std::process::exit(1);
    }
    // From here a panic or a fatal signal leaves its report in the log.
    tessera::crash_report::install(
        (!config.logfile.is_empty()).then(|| std::path::Path::new(&config.logfile)),
    );
    tracing::info!(
        "Tessera {} is starting (pid {}), Redis {} compatible",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        "7.0.15",
    );
    // Held until the process ends; the kernel releases it however the process ends.
    let _dir_lock = match tessera::process::lock_data_dir(&config.dir) {
        Ok(lock) => lock,
        Err(e) => fatal(&e.to_string()),
    };
    match tessera::process::adjust_open_files_limit(config.clients_max) {
        Ok(maxclients) => config.clients_max = maxclients,
        Err(e) => fatal(&e.to_string()),
    }
    if !config.pidfile.is_empty() {
        let _ = std::fs::write(&config.pidfile, format!("{}\n", std::process::id()));
    }
    // A file-size limit must surface as EFBIG from write(2), handled like a full disk,
    // not as a signal that kills the server.
    // SAFETY: ignoring a signal installs no handler code; nothing else sets SIGXFSZ.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    let result = tessera::server::Server::start(config, config_file).and_then(|s| s.run());
    if let Err(message) = result {
        fatal(&message.to_string());
    }
}

/// Logs the reason, repeats it on stderr and exits with status 1.
fn fatal(message: &str) -> ! {
    tracing::error!("{message}");
    eprintln!("FATAL: {message}");
    std::process::exit(1);
}
