//! Redis's `redisLrand48` / `redisSrand48` (its `rand.c`): the 48-bit linear congruential
//! generator of POSIX `lrand48`, behind `math.random` and `math.randomseed` so that a
//! script sees the same sequence on every platform.

const MULTIPLIER: u64 = 0x5_DEEC_E66D;
const INCREMENT: u64 = 0xB;
const MASK_48: u64 = (1 << 48) - 1;
/// The state before any seed (`X0`, `X1`, `X2` of `rand.c`).
const INITIAL: u64 = 0x1234_ABCD_330E;

/// Redis's `REDIS_LRAND48_MAX`.
pub const LRAND48_MAX: i32 = i32::MAX;

#[derive(Clone, Copy, Debug)]
pub struct Lrand48 {
    state: u64,
}

impl Default for Lrand48 {
    fn default() -> Self {
        Lrand48 { state: INITIAL }
    }
}

impl Lrand48 {
    /// `redisSrand48(seed)`: the seed's 32 bits above the fixed low word 0x330E.
    pub fn seed(&mut self, seed: i32) {
        self.state = ((seed as u32 as u64) << 16) | 0x330E;
    }

    /// `redisLrand48()`: the next value in 0 ..= 2^31 - 1.
    pub fn next(&mut self) -> i32 {
        self.state = (self.state.wrapping_mul(MULTIPLIER).wrapping_add(INCREMENT)) & MASK_48;
        (self.state >> 17) as i32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_lrand48() {
        // glibc's lrand48 after srand48(0) starts so.
        let mut random = Lrand48::default();
        random.seed(0);
        assert_eq!(
            [random.next(), random.next(), random.next()],
            [366850414, 1610402240, 206956554]
        );
    }
}
