//! The RESP request parser (`tessera::fuzz_targets::resp`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| tessera::fuzz_targets::resp(input));
