//! Sorted set commands (placeholder: none registered yet).

use super::CommandSpec;

pub fn commands() -> Vec<CommandSpec> {
    Vec::new()
}
