//! Power loss in the middle of writeback: which of the bytes appended since a file's last
//! sync survive ([`TornWrites`]), and the report of what survived ([`TornFile`]).

use super::Inode;
use std::ops::Range;
use std::path::PathBuf;

/// What happens to bytes appended since a file's last sync when the power goes. The
/// seeded cases draw each file's fate from the seed, so a failing case replays exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TornWrites {
    /// All of them are lost.
    None,
    /// Each file keeps a prefix of them, of a length drawn from this seed: 0 up to all.
    Seeded(u64),
    /// Each file keeps a prefix of its unsynced pages (see [`PAGE_BYTES`]), loses the
    /// pages after it and keeps a later run of pages again: a torn append whose later
    /// block reached the disk before an earlier one. The lost pages read as zeros (a hole).
    /// A file with a single unsynced page keeps a prefix of it, as with `Seeded`.
    Hole(u64),
    /// Each unsynced page of each file survives or not on its own, as writeback in no
    /// particular order leaves them: lost pages before the last one kept read as zeros.
    Scattered(u64),
}

/// The unit in which [`TornWrites::Hole`] and [`TornWrites::Scattered`] keep or lose
/// unsynced bytes: pages of the file's offsets, the block size of the usual Linux file
/// systems, which lose whole blocks after a crash.
pub const PAGE_BYTES: usize = 4096;

/// What a power loss did to a file whose live bytes were not all durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TornFile {
    pub path: PathBuf,
    /// Bytes `0..synced` were durable before the power loss and are intact after it.
    pub synced: u64,
    /// The file's length before the power loss; `synced..written` was not durable.
    pub written: u64,
    /// The ranges of `synced..written` that survived, in order. The rest is lost; where a
    /// kept range follows lost bytes, they read as zeros.
    pub kept: Vec<Range<u64>>,
}

impl TornFile {
    /// Whether lost bytes lie before kept ones (a hole), not only after them.
    pub fn has_hole(&self) -> bool {
        let mut end = self.synced;
        for range in &self.kept {
            if range.start > end {
                return true;
            }
            end = range.end;
        }
        false
    }
}

/// Lets the part of the dirty bytes that `torn` draws reach the durable image, as a crash
/// in the middle of writeback does; returns the ranges kept, in order.
pub(super) fn tear(
    inode: &mut Inode,
    torn: TornWrites,
    random: &mut SplitMix64,
) -> Vec<Range<usize>> {
    let clean_len = inode.clean_len.min(inode.live.len());
    let end = inode.live.len();
    // The dirty bytes cut at the file's page boundaries.
    let mut pages = Vec::new();
    let mut start = clean_len;
    while start < end {
        let next = ((start / PAGE_BYTES + 1) * PAGE_BYTES).min(end);
        pages.push(start..next);
        start = next;
    }
    let prefix = |random: &mut SplitMix64| {
        let kept = (random.next() % ((end - clean_len) as u64 + 1)) as usize;
        std::iter::once(clean_len..clean_len + kept).collect()
    };
    let kept: Vec<Range<usize>> = match torn {
        TornWrites::None => Vec::new(),
        _ if pages.is_empty() => Vec::new(),
        TornWrites::Seeded(_) => prefix(random),
        TornWrites::Hole(_) if pages.len() < 2 => prefix(random),
        TornWrites::Hole(_) => {
            // Pages [0, lost) kept, [lost, back) lost, [back, until) kept, the rest lost.
            let lost = random.below(pages.len() - 1);
            let back = lost + 1 + random.below(pages.len() - lost - 1);
            let until = back + 1 + random.below(pages.len() - back);
            pages[..lost]
                .iter()
                .chain(&pages[back..until])
                .cloned()
                .collect()
        }
        TornWrites::Scattered(_) => pages
            .iter()
            .filter(|_| random.next() & 1 == 1)
            .cloned()
            .collect(),
    };
    // Adjacent pages make one range.
    let mut merged: Vec<Range<usize>> = Vec::new();
    for range in kept.into_iter().filter(|r| !r.is_empty()) {
        match merged.last_mut() {
            Some(last) if last.end == range.start => last.end = range.end,
            _ => merged.push(range),
        }
    }
    for range in &merged {
        if inode.durable.len() < range.end {
            inode.durable.resize(range.end, 0);
        }
        inode.durable[range.clone()].copy_from_slice(&inode.live[range.clone()]);
    }
    merged
}

/// A small deterministic generator, so a failing seed replays exactly.
pub(super) struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator of a power loss's draws: every file's fate follows from `torn`'s seed.
    pub(super) fn seeded_by(torn: TornWrites) -> SplitMix64 {
        SplitMix64(match torn {
            TornWrites::None => 0,
            TornWrites::Seeded(seed) | TornWrites::Hole(seed) | TornWrites::Scattered(seed) => seed,
        })
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..bound` (`bound` > 0).
    pub(super) fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}
