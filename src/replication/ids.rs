//! Replication IDs: the name of a history of the dataset (PSYNC2's `replid`), the
//! previous one (`replid2`) and the offset up to which that previous history is shared
//! (`second_repl_offset`).
//!
//! A replica remembers its master's ID and offset; a partial resync is possible only
//! from the same history. A master that starts a new history (its backlog created from
//! nothing, or freed) takes a new random ID and forgets the second one, so that no replica
//! can continue a history this one no longer holds. A replica promoted to master keeps its
//! old master's ID as the second one, valid up to the offset where the histories part, so
//! its siblings can continue with it (`shift`, for the replica role and failover).

/// Redis's `CONFIG_RUN_ID_SIZE`: an ID is 40 hexadecimal characters.
pub const ID_LEN: usize = 40;

/// `replid2` when there is no previous history.
const NO_ID: &str = "0000000000000000000000000000000000000000";

#[derive(Clone, Debug)]
pub struct ReplicationIds {
    pub replid: String,
    pub replid2: String,
    /// The first offset not shared with the history of `replid2`; -1 with no `replid2`.
    pub second_offset: i64,
}

impl Default for ReplicationIds {
    fn default() -> Self {
        ReplicationIds {
            replid: random_id(),
            replid2: NO_ID.to_string(),
            second_offset: -1,
        }
    }
}

impl ReplicationIds {
    /// Redis's `changeReplicationId`: a new history begins.
    pub fn change(&mut self) {
        self.replid = random_id();
    }

    /// Redis's `clearReplicationId2`: no previous history is shared any more.
    pub fn clear_second(&mut self) {
        self.replid2 = NO_ID.to_string();
        self.second_offset = -1;
    }

    /// Redis's `shiftReplicationId`: the current history becomes the second, valid up to
    /// `offset` (a replica asks for the byte after the last it has, hence the + 1).
    pub fn shift(&mut self, offset: i64) {
        self.replid2 = std::mem::take(&mut self.replid);
        self.second_offset = offset + 1;
        self.change();
    }

    /// Whether a replica that names history `replid` and asks for byte `offset` shares
    /// this instance's history up to there (the first test of `masterTryPartialResynchronization`).
    pub fn continues(&self, replid: &[u8], offset: i64) -> bool {
        replid.eq_ignore_ascii_case(self.replid.as_bytes())
            || (replid.eq_ignore_ascii_case(self.replid2.as_bytes())
                && offset <= self.second_offset)
    }
}

/// 40 random hexadecimal characters (Redis's `getRandomHexChars`).
pub fn random_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..ID_LEN)
        .map(|_| HEX[(rand::random::<u8>() & 15) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_forty_hex_characters_and_differ() {
        let ids = ReplicationIds::default();
        assert_eq!(ids.replid.len(), ID_LEN);
        assert!(ids.replid.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(ids.replid, random_id());
        assert_eq!(ids.replid2, NO_ID);
        assert_eq!(ids.second_offset, -1);
    }

    #[test]
    fn the_second_id_is_valid_only_up_to_where_the_histories_part() {
        let mut ids = ReplicationIds::default();
        let first = ids.replid.clone();
        assert!(ids.continues(first.as_bytes(), 12345));
        ids.shift(100);
        assert!(!ids.continues(b"?", 1));
        assert!(ids.continues(first.as_bytes(), 101));
        assert!(!ids.continues(first.as_bytes(), 102));
        assert!(ids.continues(ids.replid.clone().as_bytes(), 102));
        ids.clear_second();
        assert!(!ids.continues(first.as_bytes(), 50));
    }
}
