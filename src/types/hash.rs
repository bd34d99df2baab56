//! Hashes (placeholder: arrives with the hash commands).

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hash {}

impl Hash {
    pub fn len(&self) -> usize {
        0
    }
    pub fn is_empty(&self) -> bool {
        true
    }
    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        "listpack"
    }
    /// Heap bytes held, approximately (capture accounting, MEMORY USAGE).
    pub fn approx_bytes(&self) -> usize {
        0
    }

    /// The RDB type byte this value is written with.
    pub fn rdb_type(&self) -> u8 {
        unimplemented!("placeholder")
    }

    /// Writes the value's RDB body (the type byte and the key are written already).
    pub(crate) fn write_rdb<W: std::io::Write>(
        &self,
        _writer: &mut crate::rdb::RdbWriter<W>,
    ) -> Result<(), crate::rdb::RdbError> {
        unimplemented!("placeholder")
    }

    /// Reads a value of RDB type `value_type` (one of this type's encodings).
    pub(crate) fn read_rdb<R: std::io::Read>(
        _reader: &mut crate::rdb::RdbReader<R>,
        value_type: u8,
    ) -> Result<Hash, crate::rdb::RdbError> {
        Err(crate::rdb::RdbError::UnsupportedType(value_type))
    }
}
