//! An exact software model of x87 80-bit `long double` for INCRBYFLOAT: glibc `strtold`
//! as Redis's `string2ld` uses it, correctly rounded addition (ties to even, subnormals
//! included) and glibc's correctly rounded `%.17Lf`.

use std::cmp::Ordering;

/// `mantissa * 2^exponent`; the mantissa has at most 64 significant bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ld {
    negative: bool,
    mantissa: u64,
    exponent: i64,
}

/// Weight of the lowest mantissa bit of the smallest subnormal (2^-16445).
const MIN_EXPONENT: i64 = -16445;
/// Finite values are below 2^16384.
const MAX_BITS: i64 = 16384;
/// Redis's MAX_LONG_DOUBLE_CHARS: longer input is not a float.
const MAX_CHARS: usize = 5 * 1024;

/// An unsigned big integer: little-endian 32-bit limbs, no leading zero limbs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn from_u128(mut value: u128) -> Big {
        let mut limbs = Vec::new();
        while value != 0 {
            limbs.push(value as u32);
            value >>= 32;
        }
        Big(limbs)
    }

    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn trim(mut self) -> Big {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }

    fn bits(&self) -> i64 {
        match self.0.last() {
            None => 0,
            Some(top) => (self.0.len() as i64 - 1) * 32 + 32 - top.leading_zeros() as i64,
        }
    }

    fn bit(&self, index: i64) -> bool {
        let limb = (index / 32) as usize;
        index >= 0 && limb < self.0.len() && (self.0[limb] >> (index % 32)) & 1 == 1
    }

    /// Whether any bit below `index` is set.
    fn any_below(&self, index: i64) -> bool {
        if index <= 0 {
            return false;
        }
        let full = ((index / 32) as usize).min(self.0.len());
        if self.0[..full].iter().any(|&limb| limb != 0) {
            return true;
        }
        let rest = index % 32;
        full < self.0.len() && rest != 0 && self.0[full] & ((1u32 << rest) - 1) != 0
    }

    fn mul_add_small(&mut self, multiplier: u32, addend: u32) {
        let mut carry = addend as u64;
        for limb in self.0.iter_mut() {
            let value = *limb as u64 * multiplier as u64 + carry;
            *limb = value as u32;
            carry = value >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
    }

    fn pow10(n: i64) -> Big {
        let mut value = Big::from_u128(1);
        for _ in 0..n / 9 {
            value.mul_add_small(1_000_000_000, 0);
        }
        for _ in 0..n % 9 {
            value.mul_add_small(10, 0);
        }
        value
    }

    fn shl(&self, n: i64) -> Big {
        if self.is_zero() {
            return Big::default();
        }
        let (limbs, bits) = ((n / 32) as usize, n % 32);
        let mut out = vec![0u32; limbs];
        if bits == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &limb in &self.0 {
                out.push((limb << bits) | carry);
                carry = limb >> (32 - bits);
            }
            out.push(carry);
        }
        Big(out).trim()
    }

    fn shr(&self, n: i64) -> Big {
        let (limbs, bits) = ((n / 32) as usize, n % 32);
        if limbs >= self.0.len() {
            return Big::default();
        }
        let source = &self.0[limbs..];
        let out = (0..source.len())
            .map(|i| {
                let high = match source.get(i + 1) {
                    Some(&next) if bits != 0 => next << (32 - bits),
                    _ => 0,
                };
                (source[i] >> bits) | high
            })
            .collect();
        Big(out).trim()
    }

    /// The low 128 bits.
    fn low_u128(&self) -> u128 {
        self.0
            .iter()
            .take(4)
            .rev()
            .fold(0, |acc, &limb| (acc << 32) | limb as u128)
    }

    fn compare(&self, other: &Big) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    fn add(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len().max(other.0.len()) + 1);
        let mut carry = 0u64;
        for i in 0..self.0.len().max(other.0.len()) {
            let sum =
                *self.0.get(i).unwrap_or(&0) as u64 + *other.0.get(i).unwrap_or(&0) as u64 + carry;
            out.push(sum as u32);
            carry = sum >> 32;
        }
        out.push(carry as u32);
        Big(out).trim()
    }

    /// `self - other`, for `self >= other`.
    fn sub(&self, other: &Big) -> Big {
        let mut out = Vec::with_capacity(self.0.len());
        let mut borrow = 0i64;
        for i in 0..self.0.len() {
            let mut diff = self.0[i] as i64 - *other.0.get(i).unwrap_or(&0) as i64 - borrow;
            borrow = (diff < 0) as i64;
            if diff < 0 {
                diff += 1 << 32;
            }
            out.push(diff as u32);
        }
        Big(out).trim()
    }

    fn to_decimal(&self) -> String {
        let mut chunks = Vec::new();
        let mut value = self.clone();
        while !value.is_zero() {
            let mut remainder = 0u64;
            for limb in value.0.iter_mut().rev() {
                let current = (remainder << 32) | *limb as u64;
                *limb = (current / 1_000_000_000) as u32;
                remainder = current % 1_000_000_000;
            }
            value = value.trim();
            chunks.push(remainder);
        }
        let mut text = chunks.pop().unwrap_or(0).to_string();
        for chunk in chunks.iter().rev() {
            text.push_str(&format!("{chunk:09}"));
        }
        text
    }
}

/// Rounds `(n + something below its last bit if sticky) * 2^exponent` to a long
/// double, ties to even. None when it overflows to infinity.
fn round(negative: bool, n: &Big, exponent: i64, sticky: bool) -> Option<Ld> {
    let shift = (n.bits() - 64).max(MIN_EXPONENT - exponent);
    let (mut mantissa, mut exponent) = if shift <= 0 {
        (n.low_u128(), exponent)
    } else {
        let mut mantissa = n.shr(shift).low_u128();
        let half = n.bit(shift - 1);
        let rest = sticky || n.any_below(shift - 1);
        if half && (rest || mantissa & 1 == 1) {
            mantissa += 1;
        }
        (mantissa, exponent + shift)
    };
    if mantissa >> 64 != 0 {
        mantissa >>= 1;
        exponent += 1;
    }
    if mantissa == 0 {
        exponent = 0;
    } else if 128 - mantissa.leading_zeros() as i64 + exponent > MAX_BITS {
        return None;
    }
    Some(Ld {
        negative,
        mantissa: mantissa as u64,
        exponent,
    })
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Parses an exponent's digits, saturating far beyond any meaningful value.
fn exponent_digits(text: &[u8]) -> Option<(i64, usize)> {
    let (negative, start) = match text.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let digits = text[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 {
        return None;
    }
    let value = text[start..start + digits]
        .iter()
        .fold(0i64, |acc, &d| (acc * 10 + (d - b'0') as i64).min(1 << 40));
    Some((if negative { -value } else { value }, start + digits))
}

impl Ld {
    /// The nearest double, or 0 / infinity past its range (sign kept).
    pub fn to_f64(self) -> f64 {
        let magnitude = self.mantissa as f64 * 2f64.powi(self.exponent.clamp(-2000, 2000) as i32);
        if self.negative { -magnitude } else { magnitude }
    }
}

/// Parses as Redis's `string2ld` (glibc `strtold` over the whole string, no leading
/// space, no NaN, no overflow or underflow to zero). `Some(None)` is an infinity.
pub fn parse(text: &[u8]) -> Option<Option<Ld>> {
    if text.is_empty() || text.len() >= MAX_CHARS || is_c_space(text[0]) {
        return None;
    }
    let (negative, body) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
        return Some(None);
    }
    let hex = body.len() > 2 && body[0] == b'0' && (body[1] | 0x20) == b'x';
    let (radix, marker, digits_text) = if hex {
        (16u32, b'p', &body[2..])
    } else {
        (10u32, b'e', body)
    };
    // Mantissa digits, counting those after the point and the significant ones.
    let mut n = Big::default();
    let (mut any, mut after_point, mut significant) = (false, 0i64, 0i64);
    let mut i = 0;
    let mut seen_point = false;
    while i < digits_text.len() {
        let c = digits_text[i];
        if c == b'.' && !seen_point {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(radix) {
            any = true;
            n.mul_add_small(radix, d);
            after_point += seen_point as i64;
            significant += (!n.is_zero()) as i64;
        } else {
            break;
        }
        i += 1;
    }
    if !any {
        return None;
    }
    let mut exponent = 0;
    if i < digits_text.len() && (digits_text[i] | 0x20) == marker {
        let (value, used) = exponent_digits(&digits_text[i + 1..])?;
        exponent = value;
        i += 1 + used;
    }
    if i != digits_text.len() {
        return None;
    }
    if n.is_zero() {
        return Some(Some(Ld {
            negative,
            mantissa: 0,
            exponent: 0,
        }));
    }
    let rounded = if hex {
        let exponent = (exponent - 4 * after_point).clamp(-(1 << 41), 1 << 41);
        round(negative, &n, exponent, false)?
    } else {
        let exponent = exponent - after_point;
        // Far out of range either way: strtold reports ERANGE.
        if significant + exponent > 4934 || significant + exponent < -4952 {
            return None;
        }
        if exponent >= 0 {
            let mut scaled = n;
            for _ in 0..exponent {
                scaled.mul_add_small(10, 0);
            }
            round(negative, &scaled, 0, false)?
        } else {
            // n / 10^-exponent with a quotient of 66-67 bits, remainder as sticky.
            let divisor = Big::pow10(-exponent);
            let shift = 66 + divisor.bits() - n.bits();
            let (mut dividend, divisor) = if shift >= 0 {
                (n.shl(shift), divisor)
            } else {
                (n, divisor.shl(-shift))
            };
            let mut quotient = 0u128;
            for bit in (0..=68).rev() {
                let part = divisor.shl(bit);
                if dividend.compare(&part) != Ordering::Less {
                    dividend = dividend.sub(&part);
                    quotient |= 1 << bit;
                }
            }
            round(
                negative,
                &Big::from_u128(quotient),
                -shift,
                !dividend.is_zero(),
            )?
        }
    };
    // Underflow to zero is an error in string2ld.
    (rounded.mantissa != 0).then_some(Some(rounded))
}

/// `a + b` rounded to long double; None if it overflows.
pub fn add(a: Ld, b: Ld) -> Option<Ld> {
    if a.mantissa == 0 && b.mantissa == 0 {
        return Some(Ld {
            negative: a.negative && b.negative,
            ..a
        });
    }
    if a.mantissa == 0 {
        return Some(b);
    }
    if b.mantissa == 0 {
        return Some(a);
    }
    let exponent = a.exponent.min(b.exponent);
    let x = Big::from_u128(a.mantissa as u128).shl(a.exponent - exponent);
    let y = Big::from_u128(b.mantissa as u128).shl(b.exponent - exponent);
    if a.negative == b.negative {
        return round(a.negative, &x.add(&y), exponent, false);
    }
    match x.compare(&y) {
        Ordering::Equal => Some(Ld {
            negative: false,
            mantissa: 0,
            exponent: 0,
        }),
        Ordering::Greater => round(a.negative, &x.sub(&y), exponent, false),
        Ordering::Less => round(b.negative, &y.sub(&x), exponent, false),
    }
}

/// glibc's `%.17Lf` (correctly rounded, ties to even) with trailing zeros and a
/// trailing point removed, and "-0" turned into "0", as Redis's `ld2string`.
pub fn format(value: Ld) -> String {
    const DECIMALS: usize = 17;
    let n = Big::from_u128(value.mantissa as u128);
    let scaled = if value.exponent >= 0 {
        let mut scaled = n.shl(value.exponent);
        for _ in 0..DECIMALS {
            scaled.mul_add_small(10, 0);
        }
        scaled
    } else {
        let mut product = n;
        for _ in 0..DECIMALS {
            product.mul_add_small(10, 0);
        }
        let shift = -value.exponent;
        let mut quotient = product.shr(shift);
        let half = product.bit(shift - 1);
        let odd = quotient.bit(0);
        if half && (odd || product.any_below(shift - 1)) {
            quotient = quotient.add(&Big::from_u128(1));
        }
        quotient
    };
    let digits = format!("{:0>width$}", scaled.to_decimal(), width = DECIMALS + 1);
    let (whole, fraction) = digits.split_at(digits.len() - DECIMALS);
    let fraction = fraction.trim_end_matches('0');
    let mut text = String::new();
    if value.negative {
        text.push('-');
    }
    text.push_str(whole);
    if !fraction.is_empty() {
        text.push('.');
        text.push_str(fraction);
    }
    if text == "-0" { "0".to_string() } else { text }
}
