//! FUNCTION RESTORE payloads, their CRC64 footer recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let mut payload = input.to_vec();
    if payload.len() >= 10 {
        let body = payload.len() - 8;
        let crc = tessera::rdb::crc64(&payload[..body]);
        payload[body..].copy_from_slice(&crc.to_le_bytes());
    }
    let _ = tessera::rdb::payload::decode_functions(&payload);
});
