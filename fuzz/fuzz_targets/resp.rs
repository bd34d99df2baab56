//! The RESP request parser (multibulk, inline, big arguments, unauthenticated limits):
//! never a panic, always progress, arguments inside the request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera::resp::{Parse, ParseLimits, Progress, parse_request};

fn parse_all(input: &[u8], limits: &ParseLimits) {
    let mut start = 0;
    let mut args = Vec::new();
    let mut progress = Progress::default();
    for _ in 0..=input.len() {
        match parse_request(&input[start..], limits, &mut args, &mut progress) {
            Parse::Complete(used) | Parse::Inline(_, used) => {
                assert!(used > 0 && start + used <= input.len());
                assert!(args.iter().all(|range| range.end <= used));
                start += used;
            }
            Parse::Incomplete | Parse::Invalid(_) | Parse::BigArgument { .. } => return,
        }
    }
    panic!("the parser made no progress");
}

fuzz_target!(|input: &[u8]| {
    let mut limits = ParseLimits::default();
    parse_all(input, &limits);
    limits.unauthenticated = true;
    parse_all(input, &limits);
    limits.unauthenticated = false;
    limits.big_argument_bytes_min = 16;
    limits.bulk_bytes_max = 1 << 20;
    limits.inline_bytes_max = 64;
    parse_all(input, &limits);
});
