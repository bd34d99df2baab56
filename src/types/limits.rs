//! Encoding thresholds (`hash-max-listpack-entries` and the rest), process-wide.
//!
//! They are read wherever a collection is built or grows: by commands, by the snapshot
//! loader on its own threads and by log replay. Keeping them in atomics set from the
//! configuration (at start-up and by CONFIG SET) saves threading the configuration
//! through every one of those paths; like Redis, a changed limit applies to values as
//! they are next converted, not to existing ones.

use std::sync::atomic::{AtomicI64, Ordering};

macro_rules! limit {
    ($static:ident, $getter:ident, $setter:ident, $default:expr, $doc:literal) => {
        static $static: AtomicI64 = AtomicI64::new($default);
        #[doc = $doc]
        pub fn $getter() -> i64 {
            $static.load(Ordering::Relaxed)
        }
        pub fn $setter(value: i64) {
            $static.store(value, Ordering::Relaxed)
        }
    };
}

limit!(
    HASH_MAX_LISTPACK_ENTRIES,
    hash_max_listpack_entries,
    set_hash_max_listpack_entries,
    512,
    "`hash-max-listpack-entries`: most fields of a listpack-encoded hash."
);
limit!(
    HASH_MAX_LISTPACK_VALUE,
    hash_max_listpack_value,
    set_hash_max_listpack_value,
    64,
    "`hash-max-listpack-value`: longest field or value of a listpack-encoded hash."
);
limit!(
    ZSET_MAX_LISTPACK_ENTRIES,
    zset_max_listpack_entries,
    set_zset_max_listpack_entries,
    128,
    "`zset-max-listpack-entries`: most members of a listpack-encoded sorted set."
);
limit!(
    ZSET_MAX_LISTPACK_VALUE,
    zset_max_listpack_value,
    set_zset_max_listpack_value,
    64,
    "`zset-max-listpack-value`: longest member of a listpack-encoded sorted set."
);
limit!(
    SET_MAX_INTSET_ENTRIES,
    set_max_intset_entries,
    set_set_max_intset_entries,
    512,
    "`set-max-intset-entries`: most members of an intset-encoded set."
);
limit!(
    LIST_MAX_LISTPACK_SIZE,
    list_max_listpack_size,
    set_list_max_listpack_size,
    -2,
    "`list-max-listpack-size`: a list node's limit, as entries (positive) or as -1..-5 for 4, 8, 16, 32 or 64 KB."
);
limit!(
    LIST_COMPRESS_DEPTH,
    list_compress_depth,
    set_list_compress_depth,
    0,
    "`list-compress-depth`: accepted for compatibility; Tessera does not compress list nodes."
);
limit!(
    HLL_SPARSE_MAX_BYTES,
    hll_sparse_max_bytes,
    set_hll_sparse_max_bytes,
    3000,
    "`hll-sparse-max-bytes`: the longest a sparse HyperLogLog grows (header included) before it turns dense."
);
limit!(
    STREAM_NODE_MAX_BYTES,
    stream_node_max_bytes,
    set_stream_node_max_bytes,
    4096,
    "`stream-node-max-bytes`: a stream node's listpack is closed once an entry would take it to this many bytes (0: no limit but Redis's 1 GB)."
);
limit!(
    STREAM_NODE_MAX_ENTRIES,
    stream_node_max_entries,
    set_stream_node_max_entries,
    100,
    "`stream-node-max-entries`: most entries, deleted ones included, of a stream node (0: no limit)."
);
