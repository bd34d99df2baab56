//! LCS: the longest common subsequence of two strings, as Redis 7.0 computes and
//! replies it — the string itself, its length (LEN), or the matching ranges (IDX, with
//! MINMATCHLEN and WITHMATCHLEN), a map in RESP3 and a flat array in RESP2.
//!
//! Redis's dynamic programming over a table of (len1 + 1) × (len2 + 1) 32-bit cells, walked
//! back from its end with Redis's tie-break (up when the cell above is larger, else left),
//! so that the subsequence and ranges chosen among equally long ones are Redis's. The
//! table is the command's transient memory: refused, as in Redis, when it would exceed
//! `proto-max-bulk-len`, and allocated fallibly.

use super::bitmaps::keyword;
use super::{Action, Args, CommandSpec, Ctx, SYNTAX_ERROR, flags::*, int_arg};
use crate::command;
use crate::keyspace::Value;
use crate::types::Str;

pub fn commands() -> Vec<CommandSpec> {
    vec![command!(
        "lcs",
        -3,
        READONLY,
        (1, 2, 1),
        "string",
        "Finds the longest common substring.",
        lcs
    )]
}

/// What LCS replies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// The subsequence itself (no option).
    Subsequence,
    /// LEN.
    Length,
    /// IDX: the matching ranges and the length.
    Ranges {
        min_match_len: u64,
        with_match_len: bool,
    },
}

/// One run of consecutive matching bytes, inclusive on both sides.
struct Match {
    first: (u32, u32),
    second: (u32, u32),
}

impl Match {
    fn len(&self) -> u64 {
        (self.first.1 - self.first.0) as u64 + 1
    }
}

/// A source string: absent is empty; another type is an error (Redis's own text, not
/// WRONGTYPE), reported once both keys have been looked up.
fn source(value: Option<&Value>) -> Result<Str, ()> {
    match value {
        None => Ok(Str::from("")),
        Some(Value::String(bytes, _)) => Ok(bytes.clone()),
        Some(_) => Err(()),
    }
}

fn lcs(ctx: &mut Ctx, args: &Args) -> Action {
    let first = source(ctx.lookup_read(args[1]).map(|entry| &entry.value));
    let second = source(ctx.lookup_read(args[2]).map(|entry| &entry.value));
    let (Ok(first), Ok(second)) = (first, second) else {
        ctx.out
            .error("ERR The specified keys must contain string values");
        return Action::None;
    };
    let (mut length, mut indexes, mut with_match_len) = (false, false, false);
    let mut min_match_len = 0i64;
    let mut index = 3;
    while index < args.len() {
        let option = args[index];
        let more = index + 1 < args.len();
        if keyword(option, "idx") {
            indexes = true;
        } else if keyword(option, "len") {
            length = true;
        } else if keyword(option, "withmatchlen") {
            with_match_len = true;
        } else if keyword(option, "minmatchlen") && more {
            let Some(value) = int_arg(ctx, args[index + 1]) else {
                return Action::None;
            };
            min_match_len = value.max(0);
            index += 1;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
        index += 1;
    }
    if length && indexes {
        ctx.out
            .error("ERR If you want both the length and indexes, please just use IDX.");
        return Action::None;
    }
    let answer = if indexes {
        Answer::Ranges {
            min_match_len: min_match_len as u64,
            with_match_len,
        }
    } else if length {
        Answer::Length
    } else {
        Answer::Subsequence
    };
    if first.len() >= u32::MAX as usize - 1 || second.len() >= u32::MAX as usize - 1 {
        ctx.out.error("ERR String too long for LCS");
        return Action::None;
    }
    let cells = (first.len() as u64 + 1) * (second.len() as u64 + 1);
    if cells * 4 > ctx.server.config.bulk_bytes_max as u64 {
        ctx.out
            .error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
        return Action::None;
    }
    let Some(table) = Table::build(&first, &second) else {
        ctx.out
            .error("ERR Insufficient memory, failed allocating transient memory for LCS");
        return Action::None;
    };
    let (subsequence, matches) = table.walk_back(&first, &second, answer);
    match answer {
        Answer::Subsequence => ctx.out.bulk(&subsequence),
        Answer::Length => ctx.out.integer(table.total() as i64),
        Answer::Ranges { with_match_len, .. } => {
            ctx.out.map(2);
            ctx.out.bulk(b"matches");
            ctx.out.array(matches.len());
            for found in &matches {
                ctx.out.array(2 + with_match_len as usize);
                for (start, end) in [found.first, found.second] {
                    ctx.out.array(2);
                    ctx.out.integer(start as i64);
                    ctx.out.integer(end as i64);
                }
                if with_match_len {
                    ctx.out.integer(found.len() as i64);
                }
            }
            ctx.out.bulk(b"len");
            ctx.out.integer(table.total() as i64);
        }
    }
    Action::None
}

/// LCS lengths of every pair of prefixes: cell (i, j) holds the length for the first i
/// bytes of one string and the first j of the other.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    /// The filled table, or None when its memory cannot be had.
    fn build(first: &[u8], second: &[u8]) -> Option<Table> {
        let width = second.len() + 1;
        let count = (first.len() + 1) * width;
        let mut cells: Vec<u32> = Vec::new();
        cells.try_reserve_exact(count).ok()?;
        cells.resize(count, 0);
        for i in 1..=first.len() {
            let (above, row) = cells[(i - 1) * width..(i + 1) * width].split_at_mut(width);
            for j in 1..width {
                row[j] = if first[i - 1] == second[j - 1] {
                    above[j - 1] + 1
                } else {
                    above[j].max(row[j - 1])
                };
            }
        }
        Some(Table { cells, width })
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// The length of the longest common subsequence.
    fn total(&self) -> u32 {
        self.cells[self.cells.len() - 1]
    }

    /// Redis's walk back from the table's end: the subsequence (unless only its length
    /// is wanted) and, for IDX, the runs of matches at least `min_match_len` long, last
    /// first.
    fn walk_back(&self, first: &[u8], second: &[u8], answer: Answer) -> (Vec<u8>, Vec<Match>) {
        let mut subsequence = Vec::new();
        let mut matches = Vec::new();
        if answer == Answer::Length {
            return (subsequence, matches);
        }
        let wanted = match answer {
            Answer::Ranges { min_match_len, .. } => Some(min_match_len),
            _ => None,
        };
        subsequence.resize(self.total() as usize, 0);
        let mut remaining = subsequence.len();
        let (mut i, mut j) = (first.len(), second.len());
        // The run being extended backwards, if any.
        let mut run: Option<Match> = None;
        while i > 0 && j > 0 {
            let mut ends_run = false;
            if first[i - 1] == second[j - 1] {
                subsequence[remaining - 1] = first[i - 1];
                remaining -= 1;
                let (a, b) = ((i - 1) as u32, (j - 1) as u32);
                match &mut run {
                    None => {
                        run = Some(Match {
                            first: (a, a),
                            second: (b, b),
                        })
                    }
                    // The previous step matched (i, j): the run goes on backwards.
                    Some(current) if current.first.0 == a + 1 && current.second.0 == b + 1 => {
                        current.first.0 = a;
                        current.second.0 = b;
                    }
                    Some(_) => ends_run = true,
                }
                // A run that reached the start of either string is complete.
                if let Some(current) = &run
                    && (current.first.0 == 0 || current.second.0 == 0)
                {
                    ends_run = true;
                }
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                ends_run = run.is_some();
            }
            // A finished run is dropped either way; IDX keeps it if long enough.
            if ends_run
                && let Some(done) = run.take()
                && let Some(min_match_len) = wanted
                && done.len() >= min_match_len
            {
                matches.push(done);
            }
        }
        (subsequence, matches)
    }
}
