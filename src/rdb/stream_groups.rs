//! The consumer-group section of a stream value (RDB types 15 and 19), both ways.
//!
//! Being built: groups are written as none, and a file with groups is refused.

use super::RdbError;
use super::reader::RdbReader;
use super::writer::RdbWriter;
use crate::types::stream_groups::Groups;
use std::io::{Read, Write};

/// Writes the group count and each group (after the stream's metadata).
pub(super) fn write<W: Write>(writer: &mut RdbWriter<W>, groups: &Groups) -> Result<(), RdbError> {
    writer.write_length(groups.len() as u64)
}

/// Reads the groups of a stream of type `value_type`.
pub(super) fn read<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<Groups, RdbError> {
    match reader.read_length()? {
        0 => Ok(Groups::default()),
        _ => Err(RdbError::UnsupportedType(value_type)),
    }
}
