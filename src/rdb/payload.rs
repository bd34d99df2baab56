//! DUMP / RESTORE and FUNCTION DUMP / RESTORE payloads, in Redis's DUMP format: a body,
//! then the RDB version (two bytes, little-endian) and the CRC64 of everything before
//! (eight bytes, little-endian). A key's body is its value as an RDB file holds it (the
//! type byte and the value, no key); a function payload's is each library as the
//! function opcode and its code (an RDB string).

use super::reader::RdbReader;
use super::writer::RdbWriter;
use super::{CRC64, RDB_VERSION, RdbError, RdbWriterOptions, opcode};
use crate::keyspace::Value;
use bytes::Bytes;

/// Why a payload was refused (Redis's texts, without "ERR ").
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PayloadError {
    #[error("DUMP payload version or checksum are wrong")]
    Footer,
    #[error("given type is not a function")]
    NotFunction,
    #[error("can not read data type")]
    Unreadable,
    /// A key's value that does not decode (RESTORE's text).
    #[error("Bad data format")]
    BadFormat,
}

/// The payload of a key's value (DUMP), its strings LZF-compressed when `compression`
/// (`rdbcompression`), as Redis's `createDumpPayload`.
pub fn encode_value(value: &Value, compression: bool) -> Vec<u8> {
    let mut writer = RdbWriter::headless(Vec::new(), compression);
    writer
        .put_value(value)
        .expect("writing to memory does not fail");
    let payload = writer
        .into_output()
        .expect("writing to memory does not fail");
    with_footer(payload)
}

/// The value in a key's payload (RESTORE), after checking its footer, as Redis's
/// `verifyDumpPayload` and `rdbLoadObject`: a payload of a newer RDB version or with a
/// wrong checksum is refused, as is a value that does not decode or an empty collection.
pub fn decode_value(payload: &[u8]) -> Result<Value, PayloadError> {
    let (body, version) = check_footer(payload)?;
    let mut reader = RdbReader::bare(body, version);
    let type_byte = reader
        .read_opcode()
        .map_err(|_: RdbError| PayloadError::BadFormat)?;
    match reader.read_value(type_byte) {
        Ok(value) if !value.is_empty_collection() => Ok(value),
        _ => Err(PayloadError::BadFormat),
    }
}

/// Appends the RDB version and the checksum.
fn with_footer(mut payload: Vec<u8>) -> Vec<u8> {
    payload.extend_from_slice(&(RDB_VERSION as u16).to_le_bytes());
    let checksum = CRC64.checksum(&payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

/// The body of a payload and the RDB version it names, if its footer is sound.
fn check_footer(payload: &[u8]) -> Result<(&[u8], u32), PayloadError> {
    if payload.len() < 10 {
        return Err(PayloadError::Footer);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u32::from(u16::from_le_bytes([footer[0], footer[1]]));
    let checksum = u64::from_le_bytes(footer[2..].try_into().expect("eight bytes"));
    if version > RDB_VERSION || CRC64.checksum(&payload[..payload.len() - 8]) != checksum {
        return Err(PayloadError::Footer);
    }
    Ok((body, version))
}

/// The payload of these libraries' code.
pub fn encode_functions(codes: &[Bytes]) -> Vec<u8> {
    let mut writer = RdbWriter::headless(Vec::new(), RdbWriterOptions::default().compression);
    for code in codes {
        writer
            .put_function(code)
            .expect("writing to memory does not fail");
    }
    let payload = writer
        .into_output()
        .expect("writing to memory does not fail");
    with_footer(payload)
}

/// The libraries' code in a payload, after checking its footer.
pub fn decode_functions(payload: &[u8]) -> Result<Vec<Bytes>, PayloadError> {
    let (body, version) = check_footer(payload)?;
    let mut reader = RdbReader::bare(body, version);
    let mut codes = Vec::new();
    while reader.offset() < body.len() as u64 {
        match reader.read_opcode() {
            Ok(opcode::FUNCTION2) => {}
            Ok(_) => return Err(PayloadError::NotFunction),
            Err(_) => return Err(PayloadError::Unreadable),
        }
        let code = reader
            .read_string()
            .map_err(|_: RdbError| PayloadError::Unreadable)?;
        codes.push(code);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let codes = vec![
            Bytes::from_static(
                b"#!lua name=a\nredis.register_function('f', function() return 1 end)",
            ),
            Bytes::from(vec![b'x'; 1000]),
        ];
        let payload = encode_functions(&codes);
        assert_eq!(decode_functions(&payload), Ok(codes));
        let mut damaged = payload.clone();
        damaged[3] ^= 1;
        assert_eq!(decode_functions(&damaged), Err(PayloadError::Footer));
        assert_eq!(decode_functions(b"short"), Err(PayloadError::Footer));
    }
}
