//! Transactions in the differential stream: WATCH (sometimes followed by a change from
//! this same connection, which dooms the transaction), MULTI, a few commands of any
//! family (rejected ones included, which make EXEC answer EXECABORT), then EXEC or
//! DISCARD. Only commands whose replies compare exactly go inside: EXEC's reply is one
//! array compared as a whole.

use super::{Check, Gen, Step};
use rand::RngExt;

impl Gen {
    pub(super) fn transaction_step(&mut self) -> Vec<Step> {
        let mut steps = Vec::new();
        let exact = |args: Vec<Vec<u8>>| Step {
            args,
            check: Check::Exact,
        };
        if self.chance(0.4) {
            let mut args = vec![self.word("watch")];
            args.extend(self.keys(1, 3));
            steps.push(exact(args));
            if self.chance(0.4) {
                steps.push(self.exact_single_step());
            }
            if self.chance(0.1) {
                steps.push(exact(vec![self.word("unwatch")]));
            }
        }
        steps.push(exact(vec![self.word("multi")]));
        for _ in 0..self.rng.random_range(0..6) {
            match self.rng.random_range(0..30) {
                0 => steps.push(exact(vec![self.word("multi")])),
                1 => {
                    let mut args = vec![self.word("watch")];
                    args.extend(self.keys(1, 2));
                    steps.push(exact(args));
                }
                _ => steps.push(self.exact_single_step()),
            }
        }
        let end = match self.rng.random_range(0..10) {
            0 => "discard",
            _ => "exec",
        };
        steps.push(exact(vec![self.word(end)]));
        if self.chance(0.05) {
            // Out of MULTI again: both answer "without MULTI".
            steps.push(exact(vec![self.word(end)]));
        }
        steps
    }

    /// One command whose reply compares exactly (no tolerance, no follow-up).
    fn exact_single_step(&mut self) -> Step {
        loop {
            let mut steps = self.single_step();
            if steps.len() == 1 && matches!(steps[0].check, Check::Exact) {
                return steps.pop().expect("one step");
            }
        }
    }
}
