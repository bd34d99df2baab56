//! The hashes family of the differential stream (placeholder: strings until it arrives).

use super::{Gen, Step};

impl Gen {
    pub(super) fn hash_step(&mut self) -> Vec<Step> {
        self.base_step()
    }
}
