//! The tests' `TESSERA_*` environment knobs, parsed in one place. A knob that is set must
//! make sense: a typo or a zero panics naming the variable, never turns into zero
//! iterations and a pass.

use std::fmt::Display;
use std::str::FromStr;

/// The knob's text when set (trimmed).
fn knob(name: &str) -> Option<String> {
    let value = std::env::var_os(name)?;
    let text = value
        .to_str()
        .unwrap_or_else(|| panic!("{name}={value:?}: not valid UTF-8"));
    Some(text.trim().to_string())
}

/// One number of the knob `name=whole`; `expected` ends in "at least".
fn parse<T>(name: &str, whole: &str, item: &str, min: T, expected: &str) -> T
where
    T: FromStr + PartialOrd + Display,
{
    match item.parse::<T>() {
        Ok(n) if n >= min => n,
        _ => panic!("{name}={whole:?}: expected {expected} {min}"),
    }
}

/// A number: `default` when unset; when set, a number of at least `min`.
pub fn env_number<T>(name: &str, default: T, min: T) -> T
where
    T: FromStr + PartialOrd + Display,
{
    match knob(name) {
        None => default,
        Some(text) => parse(name, &text, &text, min, "a number of at least"),
    }
}

/// A comma-separated list of numbers: `default` when unset; when set, one or more
/// numbers of at least `min`.
pub fn env_numbers<T>(name: &str, default: &[T], min: T) -> Vec<T>
where
    T: FromStr + PartialOrd + Display + Copy,
{
    match knob(name) {
        None => default.to_vec(),
        Some(text) => text
            .split(',')
            .map(|item| {
                let expected = "comma-separated numbers, each at least";
                parse(name, &text, item.trim(), min, expected)
            })
            .collect(),
    }
}

/// A switch: unset, `0` or `1`; anything else panics (`yes`, `true` and typos alike).
pub fn env_flag(name: &str) -> bool {
    match knob(name).as_deref() {
        None | Some("0") => false,
        Some("1") => true,
        Some(other) => panic!("{name}={other:?}: expected 1 (or 0, or unset)"),
    }
}
