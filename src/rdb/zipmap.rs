//! Zipmaps, the small-hash encoding of Redis before 2.6 (RDB type 9), read and validated
//! so that very old dumps load; Redis 7.0 converts them on load, and so does Tessera.
//!
//! Layout: a count byte (254 or more: count them), then per pair the field's length, the
//! field, the value's length, a "free" byte, the value and that many unused bytes; 0xFF
//! ends it. A length is one byte below 254, else 254 and a 4-byte little-endian length
//! (what Redis's x86 builds wrote). Validated as Redis's `zipmapValidateIntegrity` does.

/// Why a zipmap blob was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid zipmap: {0}")]
pub struct InvalidZipmap(pub &'static str);

const BIG_LEN: u8 = 254;

/// A field and its value, borrowed from the blob.
pub type Pair<'a> = (&'a [u8], &'a [u8]);
const END: u8 = 0xFF;

/// Every (field, value) pair, in order, after validating the whole blob.
pub fn pairs(bytes: &[u8]) -> Result<Vec<Pair<'_>>, InvalidZipmap> {
    let Some((&count, mut rest)) = bytes.split_first() else {
        return Err(InvalidZipmap("empty"));
    };
    let mut pairs = Vec::new();
    loop {
        match rest.first() {
            None => return Err(InvalidZipmap("no end marker")),
            Some(&END) => break,
            Some(_) => {}
        }
        let (field_len, after) = length(rest)?;
        let (field, after) = take(after, field_len)?;
        let (value_len, after) = length(after)?;
        let (free, after) = take(after, 1)?;
        let (value, after) = take(after, value_len)?;
        let (_unused, after) = take(after, free[0] as usize)?;
        pairs.push((field, value));
        rest = after;
    }
    if rest.len() != 1 {
        return Err(InvalidZipmap("bytes after the end marker"));
    }
    if count < BIG_LEN && count as usize != pairs.len() {
        return Err(InvalidZipmap("the pair count is wrong"));
    }
    Ok(pairs)
}

fn length(bytes: &[u8]) -> Result<(usize, &[u8]), InvalidZipmap> {
    match bytes.first() {
        None => Err(InvalidZipmap("a length runs past the end")),
        Some(&b) if b < BIG_LEN => Ok((b as usize, &bytes[1..])),
        Some(&BIG_LEN) => {
            let raw = bytes
                .get(1..5)
                .ok_or(InvalidZipmap("a length runs past the end"))?;
            let len = u32::from_le_bytes(raw.try_into().expect("4 bytes"));
            // Redis reads a pair back with the length's shortest form, so a short length
            // written long would misalign it (CVE-2026-25243); Redis's fix refuses it.
            if len < u32::from(BIG_LEN) {
                return Err(InvalidZipmap("a short length in the long form"));
            }
            Ok((len as usize, &bytes[5..]))
        }
        Some(_) => Err(InvalidZipmap("the end marker where a length belongs")),
    }
}

fn take(bytes: &[u8], len: usize) -> Result<(&[u8], &[u8]), InvalidZipmap> {
    if len > bytes.len() {
        return Err(InvalidZipmap("a string runs past the end"));
    }
    Ok(bytes.split_at(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zipmap(pairs: &[(&[u8], &[u8], u8)]) -> Vec<u8> {
        let mut out = vec![pairs.len().min(254) as u8];
        let len = |out: &mut Vec<u8>, n: usize| {
            if n < 254 {
                out.push(n as u8);
            } else {
                out.push(BIG_LEN);
                out.extend_from_slice(&(n as u32).to_le_bytes());
            }
        };
        for (field, value, free) in pairs {
            len(&mut out, field.len());
            out.extend_from_slice(field);
            len(&mut out, value.len());
            out.push(*free);
            out.extend_from_slice(value);
            out.extend(std::iter::repeat_n(0, *free as usize));
        }
        out.push(END);
        out
    }

    #[test]
    fn pairs_read_with_free_bytes_and_long_lengths() {
        let long = vec![b'v'; 300];
        let blob = zipmap(&[(b"a", b"1", 0), (b"bb", &long, 3), (b"", b"", 1)]);
        assert_eq!(
            pairs(&blob).unwrap(),
            vec![(&b"a"[..], &b"1"[..]), (b"bb", &long[..]), (b"", b"")]
        );
        for cut in 0..blob.len() {
            assert!(pairs(&blob[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_count = blob.clone();
        wrong_count[0] = 2;
        assert!(pairs(&wrong_count).is_err());
        let mut trailing = blob.clone();
        trailing.push(0);
        assert!(pairs(&trailing).is_err());
    }

    #[test]
    fn a_short_length_in_the_long_form_is_refused() {
        // "a" → "1", with the field's length 1 written as 254 + four bytes, then the
        // value's; 254 itself in the long form is the shortest form, so it is read.
        let field_long = [1, BIG_LEN, 1, 0, 0, 0, b'a', 1, 0, b'1', END];
        assert_eq!(
            pairs(&field_long),
            Err(InvalidZipmap("a short length in the long form"))
        );
        let value_long = [1, 1, b'a', BIG_LEN, 1, 0, 0, 0, 0, b'1', END];
        assert!(pairs(&value_long).is_err());
        let exact = zipmap(&[(&[b'f'; 254], b"1", 0)]);
        assert_eq!(exact[1], BIG_LEN);
        assert_eq!(pairs(&exact).unwrap(), vec![(&[b'f'; 254][..], &b"1"[..])]);
    }
}
