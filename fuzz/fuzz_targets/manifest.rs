//! The log's manifest parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| tessera::fuzz_targets::manifest(input));
