//! The log's manifest parser.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let _ = tessera::log::manifest::Manifest::parse(input);
});
