//! The sets family of the differential stream (placeholder: strings until it arrives).

use super::{Gen, Step};

impl Gen {
    pub(super) fn set_step(&mut self) -> Vec<Step> {
        self.base_step()
    }
}
