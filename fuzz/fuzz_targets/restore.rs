//! RESTORE payloads of every type and encoding, their CRC64 footer recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::fuzz_targets::{restore, with_checksum};

fuzz_target!(|input: &[u8]| restore(&with_checksum(input, 10)));
