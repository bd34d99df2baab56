//! FUNCTION RESTORE payloads, their CRC64 footer recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::fuzz_targets::{function_restore, with_checksum};

fuzz_target!(|input: &[u8]| function_restore(&with_checksum(input, 10)));
