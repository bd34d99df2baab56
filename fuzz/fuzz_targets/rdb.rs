//! Whole RDB files (a replica's full sync comes from the network), their checksum
//! recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::fuzz_targets::{rdb, with_checksum};

fuzz_target!(|input: &[u8]| rdb(&with_checksum(input, 17)));
