//! RESP: bytes to command frames and replies to bytes. No I/O here.
//!
//! The parser's contract is `Complete(consumed) | Incomplete | Invalid(reason)`; it never
//! panics and never allocates in proportion to a length the client merely *claims*
//! (a `*1000000000` header preallocates nothing), so hostile input costs at most what was
//! actually sent, which the server bounds with `client-query-buffer-limit`.

use std::ops::Range;

/// Limits the parser enforces, named as Redis names the error they produce.
#[derive(Clone, Copy, Debug)]
pub struct ParseLimits {
    /// `proto-max-bulk-len`.
    pub bulk_bytes_max: usize,
    /// Redis's `PROTO_INLINE_MAX_SIZE`: a header or inline line longer than this is refused.
    pub inline_bytes_max: usize,
    /// Before authentication Redis refuses large requests (10 arguments, 16 KiB bulks).
    pub unauthenticated: bool,
    /// A bulk at least this long that has not fully arrived is handed to the caller
    /// (`Parse::BigArgument`) to be read into a buffer of its final size, as Redis does
    /// past `PROTO_MBULK_BIG_ARG`; `usize::MAX`: never.
    pub big_argument_bytes_min: usize,
}

/// Redis's `PROTO_MBULK_BIG_ARG`: bulks from this size on are read into their own buffer.
pub const BIG_ARGUMENT_BYTES_MIN: usize = 32 * 1024;

impl Default for ParseLimits {
    fn default() -> Self {
        ParseLimits {
            bulk_bytes_max: 512 * 1024 * 1024,
            inline_bytes_max: 64 * 1024,
            unauthenticated: false,
            big_argument_bytes_min: usize::MAX,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Parse {
    /// A whole command; its arguments are the ranges pushed to `args`; `consumed` bytes used.
    Complete(usize),
    /// An inline (telnet-style) command, decoded into owned arguments; may be empty.
    Inline(Vec<Vec<u8>>, usize),
    /// More bytes are needed.
    Incomplete,
    /// A protocol error; the reply text (without `-ERR `) and the connection is closed.
    Invalid(&'static str),
    /// The next argument is a bulk of `len` bytes (at least `big_argument_bytes_min`)
    /// whose data starts at `start` and has not all arrived. Every byte of the buffer from
    /// `start` on belongs to it (data, then part of its CRLF). The caller moves those bytes
    /// out (the buffer must end at `start` at the next call), reads the rest of the data
    /// and the CRLF itself, and calls again once it has: parsing resumes after the
    /// argument, whose place in `args` is the empty range `start..start`.
    BigArgument { start: usize, len: usize },
}

/// How far an incomplete multibulk request was parsed, so that the next attempt resumes
/// there instead of re-reading a huge request from its first byte each time bytes arrive.
/// Positions are relative to the request's first byte; `args` holds the arguments so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Where the next argument starts; 0 when no request is in progress.
    next_argument: usize,
    remaining: u64,
}

/// Parses one request (multibulk or inline) from the front of `buf`, resuming from
/// `progress` (which must have come from a previous call on the same request).
/// An empty inline line yields `Inline` with no arguments; the caller skips it.
pub fn parse_request(
    buf: &[u8],
    limits: &ParseLimits,
    args: &mut Vec<Range<usize>>,
    progress: &mut Progress,
) -> Parse {
    if buf.is_empty() {
        return Parse::Incomplete;
    }
    let result = if buf[0] == b'*' {
        parse_multibulk(buf, limits, args, progress)
    } else {
        args.clear();
        parse_inline(buf, limits)
    };
    if !matches!(result, Parse::Incomplete | Parse::BigArgument { .. }) {
        *progress = Progress::default();
    }
    result
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        match buf[i + 1..].iter().position(|&b| b == b'\n') {
            Some(rel) => {
                let nl = i + 1 + rel;
                if buf[nl - 1] == b'\r' {
                    return Some(nl - 1);
                }
                i = nl;
            }
            None => return None,
        }
    }
    None
}

pub use crate::types::number::parse_i64;

fn parse_multibulk(
    buf: &[u8],
    limits: &ParseLimits,
    args: &mut Vec<Range<usize>>,
    progress: &mut Progress,
) -> Parse {
    if progress.next_argument == 0 {
        args.clear();
        let Some(end) = find_crlf(buf, 0) else {
            if buf.len() > limits.inline_bytes_max {
                return Parse::Invalid("Protocol error: too big mbulk count string");
            }
            return Parse::Incomplete;
        };
        let count = match parse_i64(&buf[1..end]) {
            Some(n) if n <= i32::MAX as i64 => n,
            _ => return Parse::Invalid("Protocol error: invalid multibulk length"),
        };
        if limits.unauthenticated && count > 10 {
            return Parse::Invalid("Protocol error: unauthenticated multibulk length");
        }
        if count <= 0 {
            return Parse::Complete(end + 2);
        }
        progress.next_argument = end + 2;
        progress.remaining = count as u64;
    }
    while progress.remaining > 0 {
        let pos = progress.next_argument;
        if pos >= buf.len() {
            return Parse::Incomplete;
        }
        if buf[pos] != b'$' {
            return Parse::Invalid(expected_dollar(buf[pos]));
        }
        let Some(end) = find_crlf(buf, pos) else {
            if buf.len() - pos > limits.inline_bytes_max {
                return Parse::Invalid("Protocol error: too big bulk count string");
            }
            return Parse::Incomplete;
        };
        let len = match parse_i64(&buf[pos + 1..end]) {
            Some(n) if n >= 0 && (n as u64) <= limits.bulk_bytes_max as u64 => n as usize,
            _ => return Parse::Invalid("Protocol error: invalid bulk length"),
        };
        if limits.unauthenticated && len > 16384 {
            return Parse::Invalid("Protocol error: unauthenticated bulk length");
        }
        let start = end + 2;
        if buf.len() < start + len + 2 {
            if len >= limits.big_argument_bytes_min {
                args.push(start..start);
                progress.next_argument = start;
                progress.remaining -= 1;
                return Parse::BigArgument { start, len };
            }
            return Parse::Incomplete;
        }
        // Redis does not check the trailing CRLF of a bulk; neither do we (same bytes eaten).
        args.push(start..start + len);
        progress.next_argument = start + len + 2;
        progress.remaining -= 1;
    }
    Parse::Complete(progress.next_argument)
}

fn expected_dollar(got: u8) -> &'static str {
    // Redis prints the offending character; a static table keeps the parser allocation-free.
    static MESSAGES: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    let table = MESSAGES.get_or_init(|| {
        (0..=255u8)
            .map(|c| {
                let text = format!("Protocol error: expected '$', got '{}'", c as char);
                &*Box::leak(text.into_boxed_str())
            })
            .collect()
    });
    table[got as usize]
}

fn parse_inline(buf: &[u8], limits: &ParseLimits) -> Parse {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.inline_bytes_max {
            return Parse::Invalid("Protocol error: too big inline request");
        }
        return Parse::Incomplete;
    };
    let line_end = if nl > 0 && buf[nl - 1] == b'\r' {
        nl - 1
    } else {
        nl
    };
    match split_args(&buf[..line_end]) {
        Some(args) => Parse::Inline(args, nl + 1),
        None => Parse::Invalid("Protocol error: unbalanced quotes in request"),
    }
}

/// Splits a line as Redis's `sdssplitargs` does: whitespace-separated, "double quotes"
/// with \n \r \t \b \a \\ \" and \xHH escapes, 'single quotes' with \' only.
/// Returns None on unbalanced quotes or a closing quote not followed by a space.
/// Like the C original, the line ends at its first NUL byte and "space" is C's `isspace`.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = match line.iter().position(|&b| b == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(out);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                if i >= line.len() {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 3 < line.len() && line[i + 1] == b'x' {
                    let hex = |b: u8| (b as char).to_digit(16);
                    if let (Some(h), Some(l)) = (hex(line[i + 2]), hex(line[i + 3])) {
                        current.push((h * 16 + l) as u8);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < line.len() {
                    let escaped = match line[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    };
                    current.push(escaped);
                    i += 2;
                } else if c == b'"' {
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                    i += 1;
                }
            } else if in_single {
                if i >= line.len() {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < line.len() && line[i + 1] == b'\'' {
                    current.push(b'\'');
                    i += 2;
                } else if c == b'\'' {
                    if i + 1 < line.len() && !is_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                    i += 1;
                }
            } else {
                if i >= line.len() {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    c => current.push(c),
                }
                i += 1;
            }
        }
        out.push(current);
    }
}

/// Writes replies in RESP2 or RESP3. Tracks whether the last reply was an error, so the
/// caller can count errors and abort transactions without re-parsing output.
pub struct ReplyWriter<'a> {
    pub buf: &'a mut Vec<u8>,
    pub resp3: bool,
    pub errors: u64,
    /// The first word of each error written (INFO errorstats); inline for one.
    pub error_kinds: smallvec::SmallVec<[crate::command_stats::ErrorKind; 1]>,
    /// Errors written that were counted where they arose (`error_counted_elsewhere`).
    pub errors_counted_elsewhere: u64,
}

impl<'a> ReplyWriter<'a> {
    pub fn new(buf: &'a mut Vec<u8>, resp3: bool) -> Self {
        ReplyWriter {
            buf,
            resp3,
            errors: 0,
            error_kinds: smallvec::SmallVec::new(),
            errors_counted_elsewhere: 0,
        }
    }

    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// An error; `message` includes its code ("ERR ...", "WRONGTYPE ...").
    pub fn error(&mut self, message: &str) {
        self.error_kinds
            .push(crate::command_stats::ErrorKind::of(message.as_bytes()));
        self.write_error(message);
    }

    /// An error already counted in the error statistics where it arose: a script passing
    /// on a command's error (Redis's `ERR_REPLY_FLAG_NO_STATS_UPDATE`).
    pub fn error_counted_elsewhere(&mut self, message: &str) {
        self.errors_counted_elsewhere += 1;
        self.write_error(message);
    }

    fn write_error(&mut self, message: &str) {
        self.errors += 1;
        self.buf.push(b'-');
        // Newlines would break the protocol; Redis replaces them with spaces too.
        self.buf.extend(
            message
                .bytes()
                .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn integer(&mut self, n: i64) {
        self.buf.push(b':');
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    fn header(&mut self, prefix: u8, n: usize) {
        self.buf.push(prefix);
        self.buf
            .extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn bulk(&mut self, data: &[u8]) {
        self.header(b'$', data.len());
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A double as Redis 7.0 replies one: a bulk string of "%.17g" (or inf / -inf) in
    /// RESP2, the double type in RESP3.
    pub fn double(&mut self, value: f64) {
        let text = crate::types::score::reply_text(value);
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(text.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }

    /// A boolean as Redis's `addReplyBool` writes it: `#t` / `#f` in RESP3, the integer 1
    /// or 0 in RESP2.
    pub fn boolean(&mut self, value: bool) {
        if self.resp3 {
            self.buf
                .extend_from_slice(if value { b"#t\r\n" } else { b"#f\r\n" });
        } else {
            self.integer(value as i64);
        }
    }

    /// A big number (its decimal digits): `(` in RESP3, a bulk string in RESP2.
    pub fn big_number(&mut self, digits: &str) {
        if self.resp3 {
            self.buf.push(b'(');
            self.buf.extend_from_slice(digits.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(digits.as_bytes());
        }
    }

    /// The header of an attribute of `n` pairs (RESP3 only: RESP2 has no way to say one,
    /// so the caller writes none there), which goes before the reply it describes.
    pub fn attribute(&mut self, n: usize) {
        debug_assert!(self.resp3, "attributes exist in RESP3 only");
        self.header(b'|', n);
    }

    pub fn bulk_i64(&mut self, n: i64) {
        self.bulk(itoa::Buffer::new().format(n).as_bytes());
    }

    /// The null bulk string (`$-1` in RESP2, `_` in RESP3).
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// The null array (`*-1` in RESP2, `_` in RESP3).
    pub fn null_array(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"*-1\r\n");
        }
    }

    pub fn array(&mut self, n: usize) {
        self.header(b'*', n);
    }

    /// A map of `n` pairs (RESP3) or a flat array of 2n elements (RESP2).
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.header(b'%', n);
        } else {
            self.header(b'*', n * 2);
        }
    }

    /// A push frame of `n` elements (RESP3 `>`, an array in RESP2): what pub/sub
    /// confirmations and messages are.
    pub fn push(&mut self, n: usize) {
        self.header(if self.resp3 { b'>' } else { b'*' }, n);
    }

    pub fn set(&mut self, n: usize) {
        self.header(if self.resp3 { b'~' } else { b'*' }, n);
    }

    /// A verbatim string in RESP3 (`=`), a bulk in RESP2 (as Redis does for INFO).
    pub fn verbatim(&mut self, data: &[u8]) {
        if self.resp3 {
            self.header(b'=', data.len() + 4);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(data);
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(data);
        }
    }

    pub fn bulk_strings<I, T>(&mut self, items: I)
    where
        I: ExactSizeIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        self.array(items.len());
        for item in items {
            self.bulk(item.as_ref());
        }
    }
}

/// Encodes a command as a RESP multibulk (the log's record format).
pub fn encode_command<T: AsRef<[u8]>>(out: &mut Vec<u8>, args: &[T]) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        let arg = arg.as_ref();
        out.push(b'$');
        out.extend_from_slice(itoa::Buffer::new().format(arg.len()).as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> (Parse, Vec<Vec<u8>>) {
        let mut ranges = Vec::new();
        let result = parse_request(
            input,
            &ParseLimits::default(),
            &mut ranges,
            &mut Progress::default(),
        );
        let args = ranges.iter().map(|r| input[r.clone()].to_vec()).collect();
        (result, args)
    }

    #[test]
    fn multibulk_complete_and_incomplete() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(
            parse(input),
            (
                Parse::Complete(input.len()),
                vec![b"GET".to_vec(), b"k".to_vec()]
            )
        );
        for cut in 0..input.len() {
            assert_eq!(parse(&input[..cut]).0, Parse::Incomplete, "cut at {cut}");
        }
        // Resuming after each byte gives the same result as parsing the whole request.
        let (mut ranges, mut progress) = (Vec::new(), Progress::default());
        for cut in 0..input.len() {
            let partial = parse_request(
                &input[..cut],
                &ParseLimits::default(),
                &mut ranges,
                &mut progress,
            );
            assert_eq!(partial, Parse::Incomplete, "resumed cut at {cut}");
        }
        let done = parse_request(input, &ParseLimits::default(), &mut ranges, &mut progress);
        assert_eq!(done, Parse::Complete(input.len()));
        assert_eq!(ranges, vec![8..11, 17..18]);
    }

    /// Random input, fed in random pieces: the parser never panics, and resuming from
    /// `Progress` gives exactly what one parse of the whole input gives.
    #[test]
    fn resumed_parsing_equals_whole_parsing_on_random_input() {
        use rand::{RngExt, SeedableRng};
        let limits = ParseLimits::default();
        for seed in 0..300u64 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut input = Vec::new();
            for _ in 0..rng.random_range(1..6) {
                let args: Vec<Vec<u8>> = (0..rng.random_range(1..5))
                    .map(|_| (0..rng.random_range(0..20)).map(|_| rng.random()).collect())
                    .collect();
                encode_command(&mut input, &args);
            }
            // Sometimes damage a byte, so that errors are exercised too.
            if seed % 3 == 0 {
                let at = rng.random_range(0..input.len());
                input[at] = rng.random();
            }
            let (mut whole_args, mut whole_progress) = (Vec::new(), Progress::default());
            let whole = parse_request(&input, &limits, &mut whole_args, &mut whole_progress);
            let (mut args, mut progress) = (Vec::new(), Progress::default());
            let mut end = 0;
            let resumed = loop {
                end = (end + rng.random_range(1..8)).min(input.len());
                let result = parse_request(&input[..end], &limits, &mut args, &mut progress);
                if result != Parse::Incomplete || end == input.len() {
                    break result;
                }
            };
            assert_eq!(resumed, whole, "seed {seed}");
            if matches!(whole, Parse::Complete(_)) {
                assert_eq!(args, whole_args, "seed {seed}");
            }
        }
    }

    #[test]
    fn protocol_errors() {
        assert_eq!(
            parse(b"*x\r\n").0,
            Parse::Invalid("Protocol error: invalid multibulk length")
        );
        assert_eq!(
            parse(b"*1\r\n$-5\r\n").0,
            Parse::Invalid("Protocol error: invalid bulk length")
        );
        assert_eq!(
            parse(b"*1\r\n+hi\r\n").0,
            Parse::Invalid("Protocol error: expected '$', got '+'")
        );
        assert_eq!(
            parse(b"*3000000000\r\n").0,
            Parse::Invalid("Protocol error: invalid multibulk length")
        );
        // A huge claimed count allocates nothing and just waits for bytes.
        assert_eq!(parse(b"*1000000\r\n").0, Parse::Incomplete);
        let long = vec![b'a'; 70 * 1024];
        assert_eq!(
            parse(&long).0,
            Parse::Invalid("Protocol error: too big inline request")
        );
    }

    #[test]
    fn inline_and_quotes() {
        let abc = vec![b"SET".to_vec(), b"a".to_vec(), b"b".to_vec()];
        assert_eq!(parse(b"SET  a b\r\n").0, Parse::Inline(abc, 10));
        assert_eq!(parse(b"\r\n").0, Parse::Inline(vec![], 2));
        assert_eq!(
            split_args(b"set \"a b\" 'c\\'d' \"\\x41\\n\""),
            Some(vec![
                b"set".to_vec(),
                b"a b".to_vec(),
                b"c'd".to_vec(),
                b"A\n".to_vec()
            ])
        );
        assert_eq!(split_args(b"set \"abc"), None);
        assert_eq!(split_args(b"set \"a\"b"), None);
        // A NUL ends the line, as in C; it must not loop forever.
        assert_eq!(split_args(b"\x00\x01 hello"), Some(vec![]));
        assert_eq!(
            split_args(b"get a\x00b c"),
            Some(vec![b"get".to_vec(), b"a".to_vec()])
        );
        assert_eq!(split_args(b"get \"a\x00\""), None);
        assert_eq!(
            split_args(b"\x0bget\x0ba\x0cb"),
            Some(vec![b"get\x0ba\x0cb".to_vec()])
        );
    }

    #[test]
    fn integers_like_string2ll() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b" 1"), None);
        assert_eq!(parse_i64(b"-0"), None);
    }
}
