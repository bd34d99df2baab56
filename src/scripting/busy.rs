//! A script that runs past `busy-reply-threshold`: what the event loop's side is told and
//! may ask for. While it runs, a Lua hook (every 100 000 instructions) hands the other
//! clients to the host (`engine::Host::serve_while_busy`), which answers them -BUSY and
//! takes SCRIPT KILL, FUNCTION KILL and SHUTDOWN NOSAVE, as Redis's `processEventsWhileBlocked`
//! does. The engine is the script's meanwhile, so nothing else may run.

/// Instructions between two looks at the clock (Redis's hook count).
pub const HOOK_INSTRUCTIONS: u32 = 100_000;

/// What the host knows of the running script.
#[derive(Clone, Debug)]
pub struct Busy {
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
