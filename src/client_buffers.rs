//! What one client may make the server hold: its big arguments and its unsent replies.
//!
//! - **Big arguments.** A bulk of at least `resp::BIG_ARGUMENT_BYTES_MIN` that has not fully
//!   arrived is read from the socket straight into the string that will hold it (Redis
//!   does the same past `PROTO_MBULK_BIG_ARG`), so a 512 MB value costs 512 MB while it is
//!   read and once stored: a command that stores it (SET and its kin, through
//!   `Ctx::value_arg`) keeps that very allocation instead of copying it. Unlike Redis,
//!   the allocation grows with the bytes that arrive (doubling, in place where the
//!   allocator can) rather than being made at the length the client claims: ten clients
//!   announcing 500 MB each and sending nothing cost nothing.
//! - **Output limits.** Redis's `client-output-buffer-limit` (hard, and soft for so many
//!   seconds), and the cap on a client that has not authenticated: one that pipelines
//!   commands and never reads the `-NOAUTH` replies must not grow the server's memory
//!   (the class of CVE-2025-21605). A client over a limit is closed and logged.

use crate::config::OutputBufferLimit;
use crate::types::string::{Str, StrBuilder};

/// Room a big argument starts with, beyond twice what has already arrived.
const BIG_ARGUMENT_FIRST_BYTES: usize = 256 * 1024;
use smallvec::SmallVec;
use std::io::Read;
use std::time::{Duration, Instant};

/// Unsent reply bytes past which a client that has not authenticated is closed. Redis
/// closes it once more than 1 KiB is queued beyond its 16 KiB reply buffer.
pub const UNAUTHENTICATED_OUTPUT_BYTES_MAX: usize = 16 * 1024 + 1024;

/// A big argument being read from the socket: its data, then its CRLF.
pub struct BigArgument {
    /// Its position among the arguments of its request.
    index: usize,
    value: StrBuilder,
    filled: usize,
    /// Bytes of the trailing CRLF still to come (never checked, as in Redis).
    crlf_left: usize,
}

impl BigArgument {
    /// Starts argument `index`, a bulk of `len` bytes of which `received` (its data, and
    /// perhaps part of its CRLF) has already been read.
    pub fn start(index: usize, len: usize, received: &[u8]) -> BigArgument {
        assert!(
            received.len() < len + 2,
            "a complete bulk is parsed in place"
        );
        let data = received.len().min(len);
        let mut value = StrBuilder::new(len, (2 * data).max(BIG_ARGUMENT_FIRST_BYTES));
        value.as_mut_slice()[..data].copy_from_slice(&received[..data]);
        BigArgument {
            index,
            value,
            filled: data,
            crlf_left: 2 - (received.len() - data),
        }
    }

    /// Reads what the socket has for this argument, at most what it still lacks, and
    /// returns (bytes read, bytes asked for): fewer than asked means the socket is drained.
    pub fn read_from(&mut self, source: &mut impl Read) -> std::io::Result<(usize, usize)> {
        if self.filled < self.value.len() {
            if self.filled == self.value.capacity() {
                // Twice the room, as the bytes come: never far ahead of them.
                self.value.grow_to(2 * self.value.capacity());
            }
            let unfilled = &mut self.value.as_mut_slice()[self.filled..];
            let wanted = unfilled.len();
            let n = source.read(unfilled)?;
            self.filled += n;
            Ok((n, wanted))
        } else {
            let mut crlf = [0u8; 2];
            let n = source.read(&mut crlf[..self.crlf_left])?;
            let wanted = self.crlf_left;
            self.crlf_left -= n;
            Ok((n, wanted))
        }
    }

    pub fn is_complete(&self) -> bool {
        self.filled == self.value.len() && self.crlf_left == 0
    }

    /// Bytes of the request this argument holds so far (for the query-buffer limit).
    pub fn received_bytes(&self) -> usize {
        self.filled + 2 - self.crlf_left
    }
}

/// The big arguments of the request being parsed: the one being read, and those complete.
#[derive(Default)]
pub struct BigArguments {
    reading: Option<BigArgument>,
    /// (position among the request's arguments, value), in position order.
    complete: SmallVec<[(usize, Str); 1]>,
}

impl BigArguments {
    pub fn begin(&mut self, argument: BigArgument) {
        assert!(self.reading.is_none(), "one big argument at a time");
        self.reading = Some(argument);
    }

    /// The argument being read, if one is.
    pub fn reading(&mut self) -> Option<&mut BigArgument> {
        self.reading.as_mut()
    }

    /// Moves the argument being read to the complete ones once all of it has arrived.
    pub fn settle(&mut self) {
        if self.reading.as_ref().is_some_and(BigArgument::is_complete) {
            let argument = self.reading.take().expect("checked");
            self.complete
                .push((argument.index, argument.value.finish()));
        }
    }

    pub fn is_reading(&self) -> bool {
        self.reading.is_some()
    }

    /// The complete arguments, for the command that the request becomes.
    pub fn complete(&self) -> &[(usize, Str)] {
        &self.complete
    }

    /// Argument `index` of a request whose other arguments are `frame[range]`.
    pub fn argument<'a>(
        &'a self,
        index: usize,
        frame: &'a [u8],
        range: std::ops::Range<usize>,
    ) -> &'a [u8] {
        match self.complete.iter().find(|(i, _)| *i == index) {
            Some((_, value)) => value,
            None => &frame[range],
        }
    }

    /// The request has run (or was dropped): let its arguments go.
    pub fn clear(&mut self) {
        self.reading = None;
        self.complete.clear();
    }

    /// Bytes held for the request being parsed.
    pub fn held_bytes(&self) -> usize {
        self.reading.as_ref().map_or(0, BigArgument::received_bytes)
            + self.complete.iter().map(|(_, v)| v.len()).sum::<usize>()
    }
}

/// Why a client's unsent replies got it closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputBreach {
    /// Not authenticated, over `UNAUTHENTICATED_OUTPUT_BYTES_MAX`.
    Unauthenticated,
    /// Over the hard limit of its class.
    Hard,
    /// Over the soft limit of its class for longer than its seconds.
    Soft,
}

/// Checks a client's unsent reply bytes against its limits. `soft_since` is when it went
/// over its soft limit (kept by the caller; reset here when it is back under).
pub fn check_output(
    unsent_bytes: usize,
    authenticated: bool,
    limit: &OutputBufferLimit,
    soft_since: &mut Option<Instant>,
    now: Instant,
) -> Option<OutputBreach> {
    if !authenticated && unsent_bytes > UNAUTHENTICATED_OUTPUT_BYTES_MAX {
        return Some(OutputBreach::Unauthenticated);
    }
    let unsent = unsent_bytes as u64;
    if limit.hard_bytes > 0 && unsent >= limit.hard_bytes {
        return Some(OutputBreach::Hard);
    }
    if limit.soft_bytes > 0 && unsent >= limit.soft_bytes {
        let since = *soft_since.get_or_insert(now);
        if now.duration_since(since) > Duration::from_secs(limit.soft_seconds) {
            return Some(OutputBreach::Soft);
        }
    } else {
        *soft_since = None;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_argument_is_read_into_place_with_its_crlf() {
        let mut argument = BigArgument::start(2, 10, b"0123");
        let mut socket: &[u8] = b"456789\r\n*1\r\n";
        assert_eq!(argument.read_from(&mut socket).unwrap(), (6, 6));
        assert!(!argument.is_complete());
        assert_eq!(argument.read_from(&mut socket).unwrap(), (2, 2));
        assert!(argument.is_complete());
        assert_eq!(socket, b"*1\r\n", "nothing past the argument is taken");
        let mut all = BigArguments::default();
        all.begin(argument);
        all.settle();
        assert!(!all.is_reading());
        assert_eq!(all.argument(2, b"", 0..0), b"0123456789");
        assert_eq!(all.argument(1, b"abc", 1..3), b"bc");
        assert_eq!(all.held_bytes(), 10);
        // Part of the CRLF already received.
        let argument = BigArgument::start(0, 3, b"abc\r");
        assert_eq!(argument.received_bytes(), 4);
    }

    #[test]
    fn output_limits_hard_soft_and_unauthenticated() {
        let now = Instant::now();
        let none = OutputBufferLimit::default();
        let mut since = None;
        assert_eq!(check_output(1 << 30, true, &none, &mut since, now), None);
        assert_eq!(
            check_output(20_000, false, &none, &mut since, now),
            Some(OutputBreach::Unauthenticated)
        );
        let limit = OutputBufferLimit {
            hard_bytes: 1000,
            soft_bytes: 100,
            soft_seconds: 2,
        };
        assert_eq!(
            check_output(1000, true, &limit, &mut since, now),
            Some(OutputBreach::Hard)
        );
        assert_eq!(check_output(150, true, &limit, &mut since, now), None);
        assert_eq!(since, Some(now));
        let later = now + Duration::from_secs(3);
        assert_eq!(
            check_output(150, true, &limit, &mut since, later),
            Some(OutputBreach::Soft)
        );
        assert_eq!(check_output(50, true, &limit, &mut since, later), None);
        assert_eq!(since, None, "back under the soft limit");
    }
}
