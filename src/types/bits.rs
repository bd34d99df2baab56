//! Bits of a string, as Redis's bitmap commands see them: bit 0 is the most significant
//! bit of byte 0, and a string is read as if zeros followed its end. Counting set bits,
//! finding the first set or clear bit, reading and writing BITFIELD's integers, and
//! BITFIELD's overflow arithmetic (WRAP, SAT, FAIL) with every corner of Redis 7.0's.
//! Pure functions over bytes: the commands (`crate::commands::bitmaps`,
//! `crate::commands::bitfield`) own the parsing, the keyspace and the replies.

/// The number of set bits in `bytes`.
pub fn popcount(bytes: &[u8]) -> u64 {
    let (words, tail) = bytes.as_chunks::<8>();
    let in_words: u64 = words
        .iter()
        .map(|word| u64::from_ne_bytes(*word).count_ones() as u64)
        .sum();
    in_words + tail.iter().map(|b| b.count_ones() as u64).sum::<u64>()
}

/// The position of the first bit equal to `bit` in `bytes`, if any.
pub fn first_bit(bytes: &[u8], bit: bool) -> Option<u64> {
    // A byte with nothing to find: all zeros when looking for a one, all ones for a zero.
    let skip = if bit { 0u8 } else { u8::MAX };
    let (words, _) = bytes.as_chunks::<8>();
    let skipped_words = words.iter().take_while(|word| **word == [skip; 8]).count();
    let from = skipped_words * 8;
    let index = from + bytes[from..].iter().position(|&b| b != skip)?;
    let byte = if bit { bytes[index] } else { !bytes[index] };
    Some(index as u64 * 8 + byte.leading_zeros() as u64)
}

/// Bit `offset` (0 past the end).
pub fn get_bit(bytes: &[u8], offset: u64) -> bool {
    let Ok(index) = usize::try_from(offset >> 3) else {
        return false;
    };
    bytes
        .get(index)
        .is_some_and(|byte| byte & (0x80 >> (offset & 7)) != 0)
}

/// Sets bit `offset`, which must be inside `bytes`.
pub fn set_bit(bytes: &mut [u8], offset: u64, on: bool) {
    let mask = 0x80 >> (offset & 7);
    let byte = &mut bytes[(offset >> 3) as usize];
    if on {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
}

/// The `bits`-wide unsigned integer at bit `offset`, most significant bit first (bits
/// past the end read as zeros). `bits` is 1 to 64.
pub fn read_unsigned(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..bits as u64).fold(0, |value, i| {
        (value << 1) | get_bit(bytes, offset + i) as u64
    })
}

/// `read_unsigned` as a two's complement integer of `bits` bits.
pub fn read_signed(bytes: &[u8], offset: u64, bits: u32) -> i64 {
    sign_extend(read_unsigned(bytes, offset, bits), bits)
}

/// Writes the low `bits` bits of `value` at bit `offset`, most significant first; the
/// field must be inside `bytes`.
pub fn write_field(bytes: &mut [u8], offset: u64, bits: u32, value: u64) {
    for i in 0..bits as u64 {
        let on = (value >> (bits as u64 - 1 - i)) & 1 != 0;
        set_bit(bytes, offset + i, on);
    }
}

fn sign_extend(value: u64, bits: u32) -> i64 {
    if bits < 64 && value & (1 << (bits - 1)) != 0 {
        (value | (u64::MAX << bits)) as i64
    } else {
        value as i64
    }
}

/// What BITFIELD does when a result leaves its field (OVERFLOW).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// Keep the low bits (the default).
    Wrap,
    /// Stop at the field's minimum or maximum.
    Saturate,
    /// Write nothing; the reply is a null.
    Fail,
}

/// Which way a result left its field, in Redis's test order.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Up,
    Down,
}

/// What an unsigned field of `bits` (1 to 63) holds after `value + increment` (SET is
/// `value` plus 0, with `value` the argument read as unsigned), or None when it
/// overflows under FAIL. Redis's tests, corners included: a negative SET value is a huge
/// unsigned one, so it overflows upwards (SAT stores the maximum).
pub fn unsigned_result(value: u64, increment: i64, bits: u32, overflow: Overflow) -> Option<u64> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let max_increment = max.wrapping_sub(value) as i64;
    let min_increment = 0u64.wrapping_sub(value) as i64;
    let direction = if value > max || (increment > 0 && increment > max_increment) {
        Direction::Up
    } else if increment < 0 && increment < min_increment {
        Direction::Down
    } else {
        return Some(value.wrapping_add(increment as u64));
    };
    match overflow {
        Overflow::Fail => None,
        Overflow::Saturate => Some(if direction == Direction::Up { max } else { 0 }),
        Overflow::Wrap => {
            let sum = value.wrapping_add(increment as u64);
            Some(if bits == 64 {
                sum
            } else {
                sum & !(u64::MAX << bits)
            })
        }
    }
}

/// `unsigned_result` for a signed field of `bits` (1 to 64). Redis computes its limits
/// with wrapping arithmetic, and this keeps its answers where that wraps: SET of a value
/// far below the field's minimum (below `max - 2^63`) counts as an overflow *upwards*,
/// so SAT stores the maximum there, as Redis does.
pub fn signed_result(value: i64, increment: i64, bits: u32, overflow: Overflow) -> Option<i64> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let max_increment = (max as u64).wrapping_sub(value as u64) as i64;
    let min_increment = min.wrapping_sub(value);
    let narrow = bits != 64;
    let direction = if value > max
        || (narrow && increment > max_increment)
        || (value >= 0 && increment > 0 && increment > max_increment)
    {
        Direction::Up
    } else if value < min
        || (narrow && increment < min_increment)
        || (value < 0 && increment < 0 && increment < min_increment)
    {
        Direction::Down
    } else {
        return Some(value.wrapping_add(increment));
    };
    match overflow {
        Overflow::Fail => None,
        Overflow::Saturate => Some(if direction == Direction::Up { max } else { min }),
        Overflow::Wrap => {
            let sum = (value as u64).wrapping_add(increment as u64);
            Some(sign_extend(
                if narrow {
                    sum & !(u64::MAX << bits)
                } else {
                    sum
                },
                bits,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_finds_bits_across_words() {
        let mut bytes = vec![0u8; 37];
        assert_eq!(popcount(&bytes), 0);
        assert_eq!(first_bit(&bytes, true), None);
        assert_eq!(first_bit(&bytes, false), Some(0));
        for offset in [3u64, 64, 65, 200, 295] {
            set_bit(&mut bytes, offset, true);
        }
        assert_eq!(popcount(&bytes), 5);
        assert_eq!(first_bit(&bytes, true), Some(3));
        assert_eq!(first_bit(&bytes[1..], true), Some(56));
        assert!(get_bit(&bytes, 65) && !get_bit(&bytes, 66) && !get_bit(&bytes, 10_000));
        let ones = vec![0xffu8; 21];
        assert_eq!(first_bit(&ones, false), None);
        let mut almost = ones.clone();
        set_bit(&mut almost, 163, false);
        assert_eq!(first_bit(&almost, false), Some(163));
        assert_eq!(popcount(&almost), 167);
    }

    #[test]
    fn fields_read_and_write_most_significant_bit_first() {
        let mut bytes = vec![0u8; 10];
        write_field(&mut bytes, 5, 8, 0xab);
        assert_eq!(&bytes[..2], &[0b0000_0101, 0b0101_1000]);
        assert_eq!(read_unsigned(&bytes, 5, 8), 0xab);
        assert_eq!(read_signed(&bytes, 5, 8), 0xab_u8 as i8 as i64);
        write_field(&mut bytes, 7, 64, u64::MAX - 1);
        assert_eq!(read_signed(&bytes, 7, 64), -2);
        assert_eq!(read_unsigned(&bytes, 7, 63), (u64::MAX - 1) >> 1);
        write_field(&mut bytes, 78, 2, 0b11);
        assert_eq!(
            read_unsigned(&bytes, 78, 8),
            0b1100_0000,
            "zeros past the end"
        );
    }

    #[test]
    fn overflow_arithmetic_as_redis() {
        use Overflow::*;
        assert_eq!(unsigned_result(250, 10, 8, Wrap), Some(4));
        assert_eq!(unsigned_result(250, 10, 8, Saturate), Some(255));
        assert_eq!(unsigned_result(250, 10, 8, Fail), None);
        assert_eq!(unsigned_result(5, -10, 8, Wrap), Some(251));
        assert_eq!(unsigned_result(5, -10, 8, Saturate), Some(0));
        assert_eq!(unsigned_result(-1i64 as u64, 0, 8, Saturate), Some(255));
        assert_eq!(unsigned_result(-1i64 as u64, 0, 8, Wrap), Some(255));
        assert_eq!(unsigned_result(7, 0, 63, Fail), Some(7));
        assert_eq!(signed_result(120, 10, 8, Wrap), Some(-126));
        assert_eq!(signed_result(120, 10, 8, Saturate), Some(127));
        assert_eq!(signed_result(-120, -10, 8, Saturate), Some(-128));
        assert_eq!(signed_result(-120, -10, 8, Wrap), Some(126));
        assert_eq!(signed_result(i64::MAX, 1, 64, Wrap), Some(i64::MIN));
        assert_eq!(signed_result(i64::MAX, 1, 64, Saturate), Some(i64::MAX));
        assert_eq!(signed_result(i64::MIN, -1, 64, Saturate), Some(i64::MIN));
        assert_eq!(signed_result(-3, 0, 1, Wrap), Some(-1));
        // Redis's wrapping limits: far below the minimum reads as an overflow upwards.
        assert_eq!(signed_result(i64::MIN, 0, 8, Saturate), Some(127));
        assert_eq!(signed_result(-(1 << 62), 0, 8, Saturate), Some(-128));
    }
}
