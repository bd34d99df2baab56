//! A script that runs past `busy-reply-threshold`: what the event loop's side is told and
//! may ask for. While it runs, a Lua hook (every 100 000 instructions) hands the other
//! clients to the host (`engine::Host::serve_while_busy`), which answers them -BUSY and
//! takes SCRIPT KILL, FUNCTION KILL, FUNCTION STATS and SHUTDOWN NOSAVE, as Redis's
//! `processEventsWhileBlocked` does. The engine is the script's meanwhile, so nothing
//! else may run.

/// Instructions between two looks at the clock (Redis's hook count).
pub const HOOK_INSTRUCTIONS: u32 = 100_000;

/// The function running, as FUNCTION STATS shows it while it runs (Redis answers FUNCTION
/// STATS then; during an EVAL it answers BUSY).
#[derive(Clone, Debug)]
pub struct RunningFunction<'a> {
    pub name: &'a str,
    /// The caller's command: its name, the function's and the key count as sent, then
    /// the keys and the arguments.
    pub head: &'a [Vec<u8>],
    pub keys: &'a [Vec<u8>],
    pub args: &'a [Vec<u8>],
    pub duration_ms: i64,
}

impl RunningFunction<'_> {
    pub fn command(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.head.iter().chain(self.keys).chain(self.args)
    }
}

/// FUNCTION STATS's reply: the running function (or null), then the Lua engine's counts.
pub fn write_function_stats(
    out: &mut crate::resp::ReplyWriter<'_>,
    running: Option<&RunningFunction<'_>>,
    libraries: usize,
    functions: usize,
) {
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null(),
        Some(function) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(function.name.as_bytes());
            out.bulk(b"command");
            out.array(function.command().count());
            for word in function.command() {
                out.bulk(word);
            }
            out.bulk(b"duration_ms");
            out.integer(function.duration_ms);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.integer(libraries as i64);
    out.bulk(b"functions_count");
    out.integer(functions as i64);
}

/// What the host knows of the running script.
#[derive(Clone, Debug)]
pub struct Busy<'a> {
    /// The script has written: SCRIPT KILL answers UNKILLABLE.
    pub wrote: bool,
    /// An EVAL (SCRIPT KILL stops it), not a function (FUNCTION KILL would).
    pub eval: bool,
    /// SHUTDOWN NOSAVE may stop the server now (not inside EXEC, whose other commands'
    /// effects could not be told from the script's).
    pub may_shutdown: bool,
    /// The limits other clients' requests are read with.
    pub bulk_bytes_max: usize,
    pub query_buffer_bytes_max: usize,
    /// A password is set: clients that have not given it are answered NOAUTH.
    pub auth_required: bool,
    /// The default user has a password (protected mode admits anyone then).
    pub password_set: bool,
    /// What admitting a new connection checks (`maxclients`, `protected-mode`).
    pub clients_max: usize,
    pub protected_mode: bool,
    /// The function running (None during an EVAL), and the libraries' and functions'
    /// counts: what FUNCTION STATS answers meanwhile.
    pub function: Option<RunningFunction<'a>>,
    pub libraries: usize,
    pub functions: usize,
}

/// What the host asks of the running script.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BusyRequest {
    #[default]
    Continue,
    /// SCRIPT KILL (or FUNCTION KILL): stop it with Redis's error.
    Kill,
    /// SHUTDOWN NOSAVE: stop it, drop its effects (none reached the log), shut down.
    ShutdownNoSave,
}

/// Redis's texts for the clients served while a script runs.
pub const BUSY_EVAL: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
pub const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
pub const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
/// The error the killed script ends with.
pub const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
