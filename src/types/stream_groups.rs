//! A stream's consumer groups: for each group its last delivered ID, entries read, the
//! pending entries list and its consumers.
//!
//! Being built: this is the shape the stream type holds while the groups are written.

/// The consumer groups of one stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Groups {}

impl Groups {
    /// How many groups there are.
    pub fn len(&self) -> usize {
        0
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
