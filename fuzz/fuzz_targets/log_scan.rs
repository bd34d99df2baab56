//! A log file's records, scanned with small and large reads that must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| tessera::fuzz_targets::log_scan(input));
