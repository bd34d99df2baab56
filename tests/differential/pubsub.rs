//! Pub/sub in the differential stream: PUBLISH and SPUBLISH (their receiver counts) and
//! PUBSUB's introspection. The only subscriber is each server's keyspace-event collector
//! (a pattern over every keyspace and keyevent channel, and its own end-of-events
//! channel), so the counts and lists are the same on both servers, and a message
//! published on a keyspace channel reaches the collector and is compared with the
//! events.

use super::{Check, Gen, Reply, Step};
use rand::RngExt;

/// Channels: ordinary ones, keyspace and keyevent channels the collector's pattern
/// matches, and names that look like patterns.
const CHANNELS: &[&str] = &[
    "news",
    "",
    "k*",
    "__keyspace@0__:k1",
    "__keyevent@2__:set",
    "__keyspace@15__:x",
    "__keyevent@0__",
];

const PATTERNS: &[&str] = &["*", "news", "__key*", "*events", "[a-z]*", "\\*"];

impl Gen {
    fn channel(&mut self) -> Vec<u8> {
        self.pick(CHANNELS).as_bytes().to_vec()
    }

    pub(super) fn pubsub_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..9) {
            0..3 => {
                args.push(self.word("publish"));
                args.push(self.channel());
                args.push(self.value());
            }
            3 => {
                args.push(self.word("spublish"));
                args.push(self.channel());
                args.push(self.value());
            }
            4 | 5 => {
                let shard = self.chance(0.3);
                args.push(self.word("pubsub"));
                args.push(self.word(if shard { "shardchannels" } else { "channels" }));
                if self.chance(0.7) {
                    args.push(self.pick(PATTERNS).as_bytes().to_vec());
                }
            }
            6 => {
                let shard = self.chance(0.3);
                args.push(self.word("pubsub"));
                args.push(self.word(if shard { "shardnumsub" } else { "numsub" }));
                for _ in 0..self.rng.random_range(0..3) {
                    args.push(self.channel());
                }
            }
            7 => {
                args.push(self.word("pubsub"));
                args.push(self.word("numpat"));
            }
            _ => {
                // Wrong arities and unknown subcommands: compared alike, but kept out of
                // transactions (which take only `Check::Exact` steps): Redis refuses them
                // when queued, Tessera at EXEC (docs/compatibility.md).
                args.push(self.word("pubsub"));
                match self.rng.random_range(0..3) {
                    0 => args.push(self.text_value()),
                    1 => {
                        args.push(self.word("numpat"));
                        args.push(self.text_value());
                    }
                    _ => {
                        args.push(self.word("channels"));
                        args.push(self.text_value());
                        args.push(self.text_value());
                    }
                }
                return vec![Step {
                    args,
                    check: Check::Compare(same),
                }];
            }
        }
        vec![Step {
            args,
            check: Check::Exact,
        }]
    }
}

fn same(ours: &Reply, theirs: &Reply) -> bool {
    ours == theirs
}
