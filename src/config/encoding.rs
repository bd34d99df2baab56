//! The encoding thresholds (`hash-max-listpack-entries` and its kin): their values, the
//! directives that set them, and their application to the collection types.

use super::directives::*;
use super::rewrite::Rewrite;
use super::*;

/// Redis 7.0's defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    pub hash_max_listpack_entries: i64,
    pub hash_max_listpack_value: i64,
    pub zset_max_listpack_entries: i64,
    pub zset_max_listpack_value: i64,
    pub set_max_intset_entries: i64,
    pub list_max_listpack_size: i64,
    pub list_compress_depth: i64,
    pub hll_sparse_max_bytes: i64,
    pub stream_node_max_bytes: i64,
    pub stream_node_max_entries: i64,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            set_max_intset_entries: 512,
            list_max_listpack_size: -2,
            list_compress_depth: 0,
            hll_sparse_max_bytes: 3000,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
        }
    }
}

impl EncodingLimits {
    /// Makes these the limits every collection is built with from now on.
    pub fn apply(&self) {
        use crate::types::limits::*;
        set_hash_max_listpack_entries(self.hash_max_listpack_entries);
        set_hash_max_listpack_value(self.hash_max_listpack_value);
        set_zset_max_listpack_entries(self.zset_max_listpack_entries);
        set_zset_max_listpack_value(self.zset_max_listpack_value);
        set_set_max_intset_entries(self.set_max_intset_entries);
        set_list_max_listpack_size(self.list_max_listpack_size);
        set_list_compress_depth(self.list_compress_depth);
        set_hll_sparse_max_bytes(self.hll_sparse_max_bytes);
        set_stream_node_max_bytes(self.stream_node_max_bytes);
        set_stream_node_max_entries(self.stream_node_max_entries);
    }
}

/// An encoding limit (an entry count) under its Redis 7 name and, if it has one, its
/// older ziplist alias (both listed by CONFIG GET, as Redis 7.0 does).
macro_rules! limit_directive {
    ($name:literal, $field:ident, $min:expr, $max:expr) => {
        directive!(
            $name,
            true,
            |c| c.encoding_limits.$field.to_string(),
            |c, a| c.encoding_limits.$field = parse_int_in(a, $min, $max)?
        )
    };
}

/// An encoding limit in bytes: a memory value, as Redis reads it (`1kb` is 1024).
macro_rules! limit_bytes_directive {
    ($name:literal, $field:ident) => {
        directive!(
            $name,
            true,
            |c| c.encoding_limits.$field.to_string(),
            |c, a| c.encoding_limits.$field = parse_memory_in(a, 0, i64::MAX as u64)? as i64
        )
        .written_as(Rewrite::Memory)
    };
}

/// The encoding thresholds.
pub static LIMIT_DIRECTIVES: &[Directive] = &[
    limit_directive!(
        "hash-max-listpack-entries",
        hash_max_listpack_entries,
        0,
        i64::MAX
    )
    .alias("hash-max-ziplist-entries"),
    limit_bytes_directive!("hash-max-listpack-value", hash_max_listpack_value)
        .alias("hash-max-ziplist-value"),
    limit_directive!(
        "zset-max-listpack-entries",
        zset_max_listpack_entries,
        0,
        i64::MAX
    )
    .alias("zset-max-ziplist-entries"),
    limit_bytes_directive!("zset-max-listpack-value", zset_max_listpack_value)
        .alias("zset-max-ziplist-value"),
    limit_directive!(
        "set-max-intset-entries",
        set_max_intset_entries,
        0,
        i64::MAX
    ),
    limit_directive!(
        "list-max-listpack-size",
        list_max_listpack_size,
        i32::MIN as i64,
        i32::MAX as i64
    )
    .alias("list-max-ziplist-size"),
    limit_directive!(
        "list-compress-depth",
        list_compress_depth,
        0,
        i32::MAX as i64
    ),
    limit_bytes_directive!("hll-sparse-max-bytes", hll_sparse_max_bytes),
    limit_bytes_directive!("stream-node-max-bytes", stream_node_max_bytes),
    limit_directive!(
        "stream-node-max-entries",
        stream_node_max_entries,
        0,
        i64::MAX
    ),
];
