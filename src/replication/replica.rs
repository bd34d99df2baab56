//! The replica's side of replication: the link to the master (REPLICAOF, `replicaof`),
//! its states, the history it follows and the offset it has processed, and the pieces of
//! the protocol a replica reads and writes — the handshake's replies, PSYNC's arguments
//! and answer, the snapshot's preamble (`$<len>` or `$EOF:<mark>`), the acknowledgement.
//!
//! The sockets are the event loop's (`server::master_link`): the handshake and the
//! snapshot run on a thread of their own with a blocking socket, as start-up loading
//! does; then the link is a session whose requests — the master's stream — run through
//! the engine as the master's (`engine::Mode::Master`), and whose bytes, once applied,
//! are this replica's own stream: its backlog and its replicas get them as they came
//! (chains), so the offsets are the same on every node of a chain.

/// Where the link to the master is (Redis's `repl_state`, as ROLE names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// To connect (at the next replication cron).
    Connect,
    /// Connecting, or in the handshake, on the sync thread.
    Handshake,
    /// Receiving or loading the master's snapshot.
    Transfer,
    /// Applying the master's stream.
    Connected,
}

impl LinkState {
    /// ROLE's state word.
    pub fn role_name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Handshake => "handshake",
            LinkState::Transfer => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// The master this instance replicates, and how far it is.
#[derive(Clone, Debug)]
pub struct MasterLink {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// The master's replication ID and the offset of its stream processed here (Redis's
    /// `master->reploff`), kept while the link is down (Redis's cached master) so that
    /// PSYNC can continue; None before the first sync.
    pub history: Option<(String, i64)>,
    /// When the link went down, Unix seconds (INFO's `master_link_down_since_seconds`).
    pub down_since: Option<i64>,
    /// The last time the master sent something, Unix seconds.
    pub last_io: i64,
    /// The snapshot's size once its preamble said it (None for the `$EOF:` framing), and
    /// the bytes received so far: INFO's `master_sync_*`.
    pub transfer_size: Option<u64>,
    pub transfer_read: u64,
    /// The master's stream asked for an acknowledgement (`REPLCONF GETACK`): sent after
    /// the command that asked.
    pub ack_requested: bool,
    /// The offset processed when the master last asked for an acknowledgement (WAIT,
    /// WAITAOF): while the FACK sent is behind it, each fsync of the log is told at once
    /// (`fack_owed`).
    pub fack_wanted: i64,
    /// The last FACK sent.
    pub fack_sent: i64,
    /// The database the master's stream is in: the snapshot's `repl-stream-db` after a
    /// full sync, the session's when the link is cut (Redis's cached master keeps its
    /// database), so that a continued stream without a `SELECT` lands where it should.
    pub stream_db: usize,
    /// The bytes of a transaction of the master's not yet executed (`MULTI` and what it
    /// queued): they count as processed, and go to this replica's backlog and replicas,
    /// only with their `EXEC`, as Redis counts them (a snapshot's offset and an
    /// acknowledgement never fall inside a transaction).
    pub transaction: Vec<u8>,
}

impl MasterLink {
    pub fn new(host: String, port: u16, history: Option<(String, i64)>) -> MasterLink {
        let now = crate::clock::unix_seconds();
        MasterLink {
            host,
            port,
            state: LinkState::Connect,
            history,
            down_since: Some(now),
            last_io: now,
            transfer_size: None,
            transfer_read: 0,
            ack_requested: false,
            fack_wanted: 0,
            fack_sent: 0,
            stream_db: 0,
            transaction: Vec::new(),
        }
    }

    /// The offset of the master's stream processed here (0 before any sync).
    pub fn processed_offset(&self) -> i64 {
        self.history.as_ref().map_or(0, |(_, offset)| *offset)
    }

    /// `REPLCONF ACK <offset processed> [FACK <offset fsynced>]`, as Redis 7.2's replica
    /// acknowledges (no FACK with the log off). `asked`: the master asked for it (GETACK).
    pub fn acknowledgement(&mut self, fsynced: Option<i64>, asked: bool) -> Vec<u8> {
        let offset = self.processed_offset();
        if asked {
            self.fack_wanted = offset;
        }
        if let Some(fsynced) = fsynced {
            self.fack_sent = fsynced;
        }
        ack_command(offset, fsynced)
    }

    /// Whether the log's fsync up to `fsynced` is news the master waits for: it asked,
    /// and the FACK it got was behind what it asked about.
    pub fn fack_owed(&self, fsynced: i64) -> bool {
        self.fack_sent < self.fack_wanted && fsynced > self.fack_sent
    }

    /// `n` more bytes of the master's stream were processed.
    pub fn processed(&mut self, n: usize) {
        if let Some((_, offset)) = &mut self.history {
            *offset += n as i64;
        }
    }
}

/// PSYNC's arguments: the history to continue and the first byte wanted, or `? -1` for a
/// full sync (Redis's `slaveTryPartialResynchronization`).
pub fn psync_arguments(history: Option<&(String, i64)>) -> (String, String) {
    match history {
        Some((replid, offset)) => (replid.clone(), (offset + 1).to_string()),
        None => ("?".to_string(), "-1".to_string()),
    }
}

/// What the master answered PSYNC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PsyncAnswer {
    /// A full sync: the snapshot follows, taken at `offset` of history `replid`.
    FullResync { replid: String, offset: i64 },
    /// The stream continues from the offset asked for; with PSYNC2, the master's history
    /// may have a new ID (it was promoted).
    Continue { replid: Option<String> },
    /// The master cannot now (`-NOMASTERLINK`, `-LOADING`): try again later.
    TryLater(String),
    /// An error, or a reply this replica does not understand.
    Refused(String),
}

/// Redis's `afterErrorReply` for its master's client: an error this replica answered to
/// a command of the master's stream (the reply is dropped) means the datasets diverged,
/// or a bug; it is logged as Redis logs it, with the error (its first 4,096 bytes) and
/// the command's full name.
pub fn log_error_to_master(reply: &[u8], argv: &[&[u8]]) {
    let end = reply
        .iter()
        .position(|&b| b == b'\r')
        .unwrap_or(reply.len())
        .min(4096 + 1);
    // Redis logs what its reply function was given: the text without `ERR ` for the
    // generic code.
    let text = &reply[1..end];
    let error = String::from_utf8_lossy(text.strip_prefix(b"ERR ").unwrap_or(text));
    let name = crate::commands::global_registry()
        .get(argv[0])
        .map(|spec| {
            crate::acl::table::table()
                .for_request(spec.name, argv)
                .map_or_else(|| spec.name.to_string(), |c| c.full_name.clone())
        })
        .unwrap_or_else(|| "<unknown>".to_string());
    tracing::warn!(
        "== CRITICAL == This replica is sending an error to its master: '{error}' after processing the command '{name}'"
    );
}

/// Reads PSYNC's reply line (without its CRLF).
pub fn parse_psync_answer(line: &str) -> PsyncAnswer {
    if let Some(rest) = line.strip_prefix("+FULLRESYNC") {
        let mut words = rest.split_whitespace();
        return match (words.next(), words.next().and_then(|w| w.parse().ok())) {
            (Some(replid), Some(offset)) if replid.len() == super::ids::ID_LEN => {
                PsyncAnswer::FullResync {
                    replid: replid.to_string(),
                    offset,
                }
            }
            _ => PsyncAnswer::Refused(format!("wrong +FULLRESYNC syntax: {line}")),
        };
    }
    if let Some(rest) = line.strip_prefix("+CONTINUE") {
        let id = rest.trim();
        return PsyncAnswer::Continue {
            replid: (id.len() == super::ids::ID_LEN).then(|| id.to_string()),
        };
    }
    if line.starts_with("-NOMASTERLINK") || line.starts_with("-LOADING") {
        return PsyncAnswer::TryLater(line.to_string());
    }
    PsyncAnswer::Refused(line.to_string())
}

/// How the snapshot's length is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preamble {
    /// `$<len>`: that many bytes follow.
    Length(u64),
    /// `$EOF:<40 bytes>` (a diskless sync): the snapshot ends with those 40 bytes.
    EndMark(Vec<u8>),
}

/// Bytes of the `$EOF:` mark (Redis's `CONFIG_RUN_ID_SIZE`).
pub const END_MARK_BYTES: usize = 40;

/// Reads the snapshot's preamble line (without its CRLF).
pub fn parse_preamble(line: &[u8]) -> Result<Preamble, String> {
    let shown = || String::from_utf8_lossy(line).into_owned();
    if line.first() == Some(&b'-') {
        return Err(format!("the master aborted the sync: {}", shown()));
    }
    let Some(rest) = line.strip_prefix(b"$") else {
        return Err(format!(
            "bad protocol from the master, the first byte is not '$': {}",
            shown()
        ));
    };
    if let Some(mark) = rest.strip_prefix(b"EOF:") {
        if mark.len() < END_MARK_BYTES {
            return Err(format!("a short end mark: {}", shown()));
        }
        return Ok(Preamble::EndMark(mark[..END_MARK_BYTES].to_vec()));
    }
    std::str::from_utf8(rest)
        .ok()
        .and_then(|n| n.parse().ok())
        .map(Preamble::Length)
        .ok_or_else(|| format!("a bad snapshot length: {}", shown()))
}

/// `REPLCONF ACK <offset>`, as a replica acknowledges what it processed, and with
/// `FACK <offset>` what its log fsynced (Redis 7.2; a Redis 7.0 master ignores it).
pub fn ack_command(offset: i64, fsynced: Option<i64>) -> Vec<u8> {
    let mut command = Vec::new();
    let offset = offset.to_string();
    match fsynced {
        None => crate::resp::encode_command(
            &mut command,
            &[b"REPLCONF" as &[u8], b"ACK", offset.as_bytes()],
        ),
        Some(fsynced) => crate::resp::encode_command(
            &mut command,
            &[
                b"REPLCONF" as &[u8],
                b"ACK",
                offset.as_bytes(),
                b"FACK",
                fsynced.to_string().as_bytes(),
            ],
        ),
    }
    command
}

/// Whether an answer to the handshake's PING lets it go on: PONG, or the errors that mean
/// the master wants authentication first (Redis's `syncWithMaster`).
pub fn ping_answer_ok(line: &str) -> bool {
    !line.starts_with('-')
        || line.starts_with("-NOAUTH")
        || line.starts_with("-NOPERM")
        || line.starts_with("-ERR operation not permitted")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psync_continues_the_history_from_the_byte_after_the_last_processed() {
        assert_eq!(psync_arguments(None), ("?".into(), "-1".into()));
        let history = ("a".repeat(40), 1000);
        assert_eq!(
            psync_arguments(Some(&history)),
            ("a".repeat(40), "1001".into())
        );
        let mut link = MasterLink::new("h".into(), 1, Some(history));
        link.processed(24);
        assert_eq!(link.processed_offset(), 1024);
    }

    #[test]
    fn psync_answers_are_read_as_redis_reads_them() {
        let id = "b".repeat(40);
        assert_eq!(
            parse_psync_answer(&format!("+FULLRESYNC {id} 77")),
            PsyncAnswer::FullResync {
                replid: id.clone(),
                offset: 77
            }
        );
        assert!(matches!(
            parse_psync_answer("+FULLRESYNC short 77"),
            PsyncAnswer::Refused(_)
        ));
        assert_eq!(
            parse_psync_answer(&format!("+CONTINUE {id}")),
            PsyncAnswer::Continue { replid: Some(id) }
        );
        assert_eq!(
            parse_psync_answer("+CONTINUE"),
            PsyncAnswer::Continue { replid: None }
        );
        assert!(matches!(
            parse_psync_answer("-LOADING Redis is loading"),
            PsyncAnswer::TryLater(_)
        ));
        assert!(matches!(
            parse_psync_answer("-ERR nope"),
            PsyncAnswer::Refused(_)
        ));
    }

    #[test]
    fn preambles_give_a_length_or_an_end_mark() {
        assert_eq!(parse_preamble(b"$1234"), Ok(Preamble::Length(1234)));
        let mark = [b'x'; 40];
        let mut line = b"$EOF:".to_vec();
        line.extend_from_slice(&mark);
        assert_eq!(parse_preamble(&line), Ok(Preamble::EndMark(mark.to_vec())));
        assert!(parse_preamble(b"$EOF:short").is_err());
        assert!(parse_preamble(b"+OK").is_err());
        assert!(parse_preamble(b"-ERR no").is_err());
        assert!(parse_preamble(b"$-5").is_err());
    }

    #[test]
    fn the_handshake_goes_on_after_pong_or_an_authentication_error() {
        assert!(ping_answer_ok("+PONG"));
        assert!(ping_answer_ok("-NOAUTH Authentication required."));
        assert!(!ping_answer_ok("-ERR unknown"));
        assert_eq!(
            ack_command(42, None),
            b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$2\r\n42\r\n"
        );
        assert_eq!(
            ack_command(42, Some(7)),
            b"*5\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$2\r\n42\r\n$4\r\nFACK\r\n$1\r\n7\r\n"
        );
    }
}
