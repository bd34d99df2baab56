//! What goes wrong with the configuration, as types: a directive refusing a value
//! (`ValueError`, shared by the config file, the flags and CONFIG SET) and start-up
//! failing to read its configuration (`ConfigError`). Their `Display` texts are Redis
//! 7.0.15's messages, byte for byte where Redis has the case; tests compare them.

/// Why a directive refuses a value. The texts are Redis 7.0's, where Redis has the case:
/// CONFIG SET puts them after "CONFIG SET failed (possibly related to argument ...) - ",
/// start-up after the offending line.
#[derive(Debug)]
pub enum ValueError {
    /// The directive takes one word (or, for `bind`, at least one).
    WrongArgumentCount,
    NotYesOrNo,
    NotInteger,
    /// Outside `min..=max` (wide enough for every bound Redis names, `ULLONG_MAX` too).
    OutOfRange {
        min: i128,
        max: i128,
    },
    NotMemory,
    /// A word outside an enumeration; `choices` as Redis lists them.
    NotOneOf {
        choices: &'static str,
    },
    TooManyBindAddresses,
    /// `client-output-buffer-limit` takes groups of four words.
    BufferLimitWordCount,
    BufferLimitClass,
    BufferLimitValue,
    SaveParameters,
    NotPlainFileName,
    /// The name of the data directory's lock file, which no data file may take.
    LockFileName,
    /// `dir` names nothing, or not a directory: Redis reports the OS's reason alone.
    Directory(std::io::Error),
    /// `daemonize yes`: Tessera runs in the foreground only.
    DaemonizeUnsupported,
    /// `notify-keyspace-events` with a letter that names no class.
    KeyspaceEvents(crate::notify::InvalidEventClass),
    /// `latency-tracking-info-percentiles`: a word that is no number, or one outside
    /// 0..100 (Redis's two texts).
    Percentiles(&'static str),
    /// A word outside an enumeration: its names, as Redis lists them.
    NotAmong(String),
    /// A refusal in Redis's fixed words (a hostname, a master's port, a template, ...).
    Invalid(&'static str),
    /// An octal value outside `min..=max` (`unixsocketperm`), the bounds in octal.
    OctalOutOfRange {
        min: u64,
        max: u64,
    },
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValueError::WrongArgumentCount => f.write_str("wrong number of arguments"),
            ValueError::NotYesOrNo => f.write_str("argument must be 'yes' or 'no'"),
            ValueError::NotInteger => f.write_str("argument couldn't be parsed into an integer"),
            ValueError::OutOfRange { min, max } => {
                write!(f, "argument must be between {min} and {max} inclusive")
            }
            ValueError::NotMemory => f.write_str("argument must be a memory value"),
            ValueError::NotOneOf { choices } => {
                write!(f, "argument(s) must be one of the following: {choices}")
            }
            ValueError::TooManyBindAddresses => f.write_str("Too many bind addresses specified."),
            ValueError::BufferLimitWordCount => {
                f.write_str("Wrong number of arguments in buffer limit configuration.")
            }
            ValueError::BufferLimitClass => {
                f.write_str("Invalid client class specified in buffer limit configuration.")
            }
            ValueError::BufferLimitValue => f.write_str(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            ),
            ValueError::SaveParameters => f.write_str("Invalid save parameters"),
            ValueError::NotPlainFileName => f.write_str("must be a plain file name, not a path"),
            ValueError::LockFileName => write!(
                f,
                "{} is the name of the data directory's lock file",
                crate::process::LOCK_FILE
            ),
            ValueError::Directory(error) => f.write_str(&crate::process::os_error_text(error)),
            ValueError::DaemonizeUnsupported => {
                f.write_str("daemonize yes is not supported; run under a supervisor")
            }
            ValueError::KeyspaceEvents(error) => write!(f, "{error}"),
            ValueError::Percentiles(text) => f.write_str(text),
            ValueError::NotAmong(choices) => {
                write!(f, "argument(s) must be one of the following: {choices}")
            }
            ValueError::Invalid(text) => f.write_str(text),
            ValueError::OctalOutOfRange { min, max } => {
                write!(f, "argument must be between {min:o} and {max:o} inclusive")
            }
        }
    }
}

/// Why the configuration (the file, then the command-line flags) cannot be read. It
/// displays as what tessera-server prints before it exits, after redis-server's wording.
#[derive(Debug)]
pub enum ConfigError {
    /// The configuration file named on the command line cannot be read.
    UnreadableFile {
        path: String,
        error: std::io::Error,
    },
    /// A command-line word that follows no `--directive`.
    ArgumentWithoutDirective {
        argument: String,
    },
    UnbalancedQuotes {
        at: ConfigLine,
    },
    /// The first word names no directive.
    UnknownDirective {
        at: ConfigLine,
    },
    /// The directive refused its value.
    BadValue {
        at: ConfigLine,
        directive: &'static str,
        reason: ValueError,
    },
    /// A `user` line with a rule ACL refuses; `word` is the one Redis names.
    UserDeclaration {
        at: ConfigLine,
        word: String,
        reason: crate::acl::rules::RuleError,
    },
}

/// The line a directive came from, for the error message.
#[derive(Debug)]
pub struct ConfigLine {
    /// The line number in the file; None for the command-line flags.
    pub number: Option<usize>,
    pub text: String,
}

impl ConfigLine {
    /// redis-server's block: a banner, where the line was read, the line, the reason.
    fn write_fatal(
        &self,
        f: &mut std::fmt::Formatter<'_>,
        reason: &dyn std::fmt::Display,
    ) -> std::fmt::Result {
        writeln!(
            f,
            "*** FATAL CONFIG FILE ERROR (Tessera {}) ***",
            env!("CARGO_PKG_VERSION")
        )?;
        match self.number {
            Some(n) => writeln!(f, "Reading the configuration file, at line {n}")?,
            None => writeln!(f, "Reading the command line arguments")?,
        }
        writeln!(f, ">>> '{}'", self.text)?;
        write!(f, "{reason}")
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::UnreadableFile { path, error } => {
                write!(f, "Fatal error, can't open config file '{path}': {error}")
            }
            ConfigError::ArgumentWithoutDirective { argument } => {
                write!(f, "Invalid argument '{argument}': directives start with --")
            }
            ConfigError::UnbalancedQuotes { at } => {
                at.write_fatal(f, &"Unbalanced quotes in configuration line")
            }
            ConfigError::UnknownDirective { at } => {
                at.write_fatal(f, &"Bad directive or wrong number of arguments")
            }
            ConfigError::BadValue { at, reason, .. } => at.write_fatal(f, reason),
            ConfigError::UserDeclaration { at, word, reason } => {
                at.write_fatal(f, &format!("Error in user declaration '{word}': {reason}"))
            }
        }
    }
}

impl std::error::Error for ValueError {}

impl std::error::Error for ConfigError {}
