//! FUNCTION DUMP / RESTORE payloads: Redis's DUMP format for function libraries — each
//! library as the function opcode and its code (an RDB string), then the RDB version (two
//! bytes, little-endian) and the CRC64 of everything before (eight bytes, little-endian).

use super::reader::RdbReader;
use super::writer::RdbWriter;
use super::{CRC64, RDB_VERSION, RdbError, RdbWriterOptions, opcode};
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
}

/// The payload of these libraries' code.
pub fn encode_functions(codes: &[Bytes]) -> Vec<u8> {
    let mut writer = RdbWriter::headless(Vec::new(), RdbWriterOptions::default().compression);
    for code in codes {
        writer
            .put_function(code)
            .expect("writing to memory does not fail");
    }
    let mut payload = writer
        .into_output()
        .expect("writing to memory does not fail");
    payload.extend_from_slice(&(RDB_VERSION as u16).to_le_bytes());
    let checksum = CRC64.checksum(&payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

/// The libraries' code in a payload, after checking its footer.
pub fn decode_functions(payload: &[u8]) -> Result<Vec<Bytes>, PayloadError> {
    if payload.len() < 10 {
        return Err(PayloadError::Footer);
    }
    let (body, footer) = payload.split_at(payload.len() - 10);
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let checksum = u64::from_le_bytes(footer[2..].try_into().expect("eight bytes"));
    if u32::from(version) > RDB_VERSION || CRC64.checksum(&payload[..payload.len() - 8]) != checksum
    {
        return Err(PayloadError::Footer);
    }
    let mut reader = RdbReader::bare(body);
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
