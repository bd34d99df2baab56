//! HyperLogLog as Redis 7.0 stores it: a plain string value whose bytes are the sketch.
//!
//! Clients read those bytes (GET, DUMP, a replica of either server), so they must be
//! Redis's to the bit for the same inputs: the same hash, the same register layout, the
//! same sparse opcodes chosen the same way, the same promotion point, the same cached
//! cardinality. Everything here works on byte slices and vectors; the commands
//! (`crate::commands::hyperloglog`) store the result as a new string.
//!
//! # Layout
//!
//! A 16-byte header: the magic `HYLL`, one encoding byte (0 dense, 1 sparse), three
//! unused bytes (kept as found: a conversion copies the whole header), and the cached
//! cardinality, a little-endian u64 whose top bit set means "stale, recount".
//!
//! - **Dense**: 16384 registers of 6 bits, packed from the least significant bit of each
//!   byte upwards (register 1 is the top two bits of byte 0 and the low four of byte 1),
//!   12288 bytes; the whole value is exactly 12304 bytes.
//! - **Sparse**: run-length opcodes over the registers in order. `00xxxxxx` (ZERO): 1 to
//!   64 zero registers. `01xxxxxx yyyyyyyy` (XZERO): 1 to 16384 zero registers, the
//!   14-bit count less one big-endian. `1vvvvvxx` (VAL): 1 to 4 registers of value 1 to
//!   32. A new sketch is one XZERO of 16384. A register above 32, or a change that would
//!   grow the value past `hll-sparse-max-bytes`, turns the sketch dense for good.
//!
//! # Damaged values
//!
//! Any string that starts with `HYLL` and a known encoding is taken for a sketch (a dense
//! one must also have the exact length), so the opcodes can be anything a client wrote.
//! Damage is reported where Redis finds it (`Corrupt`): a sparse sketch whose opcodes do
//! not cover exactly the 16384 registers, any opcode running past the last one counting
//! as damage (the rule of Redis 7.0.15 as Debian ships it, with the fix for
//! CVE-2025-32023). Where Redis changes a damaged sparse value anyway, before it trips
//! over the damage, this changes it the same way, so that the bytes a client reads back
//! stay Redis's. Nothing here indexes past the value: where Redis reads the byte after
//! the last one (its strings end in a zero byte), this reads a zero, or, while one
//! command changes the value, the byte Redis's own change left there (`Sketch`).

/// Registers per sketch (Redis's `HLL_REGISTERS`, 2^14).
pub const REGISTERS: usize = 1 << INDEX_BITS;
/// Bits of the hash that pick the register.
const INDEX_BITS: u32 = 14;
/// Bits of the hash left to count the run of zeros in (Redis's `HLL_Q`).
const RUN_BITS: u32 = 64 - INDEX_BITS;
const REGISTER_BITS: usize = 6;
const REGISTER_MAX: u64 = (1 << REGISTER_BITS) - 1;
pub const HEADER_BYTES: usize = 16;
/// The length of every dense sketch.
pub const DENSE_BYTES: usize = HEADER_BYTES + REGISTERS * REGISTER_BITS / 8;
/// MurmurHash64A's seed in Redis's `hllPatLen`.
const HASH_SEED: u64 = 0xadc8_3b19;
const MAGIC: &[u8; 4] = b"HYLL";
const ENCODING_AT: usize = 4;
/// Where the cached cardinality sits in the value (PFCOUNT's log record rewrites it).
pub const CARDINALITY_AT: usize = 8;
/// The byte of the cached cardinality whose top bit marks it stale.
const STALE_BYTE_AT: usize = 15;
const STALE_BIT: u8 = 0x80;

const SPARSE_VAL_VALUE_MAX: u8 = 32;
const SPARSE_VAL_RUN_MAX: u32 = 4;
const SPARSE_ZERO_RUN_MAX: u32 = 64;
const SPARSE_XZERO_RUN_MAX: u32 = 16384;

/// The reply to a value that is no sketch at all (Redis's `isHLLObjectOrReply`).
pub const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// The reply to a sketch whose sparse opcodes do not add up (Redis's `invalid_hll_err`).
pub const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

impl Encoding {
    fn byte(self) -> u8 {
        match self {
            Encoding::Dense => 0,
            Encoding::Sparse => 1,
        }
    }

    /// PFDEBUG ENCODING's word.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
        }
    }
}

/// The value is not a sketch: wrong magic, unknown encoding, a dense one of the wrong
/// length, or too short for a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotHll;

/// A sparse sketch whose opcodes do not cover exactly 16384 registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// The encoding of a string that passes Redis's checks for a sketch.
pub fn encoding_of(bytes: &[u8]) -> Result<Encoding, NotHll> {
    if bytes.len() < HEADER_BYTES || &bytes[..4] != MAGIC {
        return Err(NotHll);
    }
    match bytes[ENCODING_AT] {
        0 if bytes.len() == DENSE_BYTES => Ok(Encoding::Dense),
        1 => Ok(Encoding::Sparse),
        _ => Err(NotHll),
    }
}

/// An empty sketch, as PFADD and PFMERGE create one: sparse, one XZERO of 16384, the
/// cached cardinality 0 and valid.
pub fn new_sparse() -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_BYTES + 2);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[Encoding::Sparse.byte(), 0, 0, 0]);
    bytes.extend_from_slice(&[0; 8]);
    push_xzero(&mut bytes, SPARSE_XZERO_RUN_MAX);
    bytes
}

/// The cached cardinality, if it is not marked stale.
pub fn cached_cardinality(bytes: &[u8]) -> Option<u64> {
    if bytes[STALE_BYTE_AT] & STALE_BIT != 0 {
        return None;
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[CARDINALITY_AT..CARDINALITY_AT + 8]);
    Some(u64::from_le_bytes(word))
}

/// The eight bytes that cache `cardinality` in the header.
pub fn cardinality_bytes(cardinality: u64) -> [u8; 8] {
    cardinality.to_le_bytes()
}

pub fn set_cached_cardinality(bytes: &mut [u8], cardinality: u64) {
    bytes[CARDINALITY_AT..CARDINALITY_AT + 8].copy_from_slice(&cardinality_bytes(cardinality));
}

/// Marks the cached cardinality stale. Only the top bit changes: the other bytes keep the
/// last count, as in Redis (they are part of the value a client reads).
pub fn invalidate_cache(bytes: &mut [u8]) {
    bytes[STALE_BYTE_AT] |= STALE_BIT;
}

// ---------------------------------------------------------------------------------------
// Hashing.

/// MurmurHash64A (Austin Appleby's MurmurHash2, 64-bit), reading its 8-byte blocks as
/// little-endian words whatever the machine, as Redis's copy does.
pub fn murmur_hash64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    // Redis multiplies the length as an `int` converted to 64 bits: the same for every
    // length a string can have here (below 2^31 bytes per argument).
    let mut hash = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut word = u64::from_le_bytes(block.try_into().expect("an 8-byte block"));
        word = word.wrapping_mul(M);
        word ^= word >> R;
        word = word.wrapping_mul(M);
        hash ^= word;
        hash = hash.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &byte) in tail.iter().enumerate() {
            hash ^= u64::from(byte) << (8 * i);
        }
        hash = hash.wrapping_mul(M);
    }
    hash ^= hash >> R;
    hash = hash.wrapping_mul(M);
    hash ^= hash >> R;
    hash
}

/// The register an element falls in and the value it offers: the length of the run of
/// zeros, counted from the low end of the hash bits above the index, plus one (1 to 51).
pub fn register_and_count(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash64a(element, HASH_SEED);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The bit past the last one counted ends the run: at most RUN_BITS zeros.
    let rest = (hash >> INDEX_BITS) | (1 << RUN_BITS);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------------------
// Dense registers.

/// Register `index` of a dense register area (the bytes after the header).
fn dense_get(registers: &[u8], index: usize) -> u8 {
    let at = index * REGISTER_BITS / 8;
    let shift = (index * REGISTER_BITS) & 7;
    let low = u64::from(registers[at]);
    // The last register lies in its byte alone: the byte after the area adds nothing.
    let high = registers.get(at + 1).copied().map_or(0, u64::from);
    (((low >> shift) | (high << (8 - shift))) & REGISTER_MAX) as u8
}

/// Sets register `index` of a dense register area to `value` (at most 63).
fn dense_put(registers: &mut [u8], index: usize, value: u8) {
    let at = index * REGISTER_BITS / 8;
    let shift = (index * REGISTER_BITS) & 7;
    let value = u64::from(value) & REGISTER_MAX;
    let low = &mut registers[at];
    *low = ((u64::from(*low) & !(REGISTER_MAX << shift)) | (value << shift)) as u8;
    if let Some(high) = registers.get_mut(at + 1) {
        let spill = 8 - shift;
        *high = ((u64::from(*high) & !(REGISTER_MAX >> spill)) | (value >> spill)) as u8;
    }
}

/// Raises register `index` of a dense sketch to `count` if it is lower; whether it did.
fn dense_raise(sketch: &mut [u8], index: usize, count: u8) -> bool {
    let registers = &mut sketch[HEADER_BYTES..];
    if count > dense_get(registers, index) {
        dense_put(registers, index, count);
        true
    } else {
        false
    }
}

/// The registers of a dense sketch, one byte each (PFDEBUG GETREG).
pub fn dense_registers(sketch: &[u8]) -> Vec<u8> {
    let registers = &sketch[HEADER_BYTES..];
    (0..REGISTERS).map(|i| dense_get(registers, i)).collect()
}

// ---------------------------------------------------------------------------------------
// Sparse opcodes.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Zero { run: u32 },
    XZero { run: u32 },
    Val { value: u8, run: u32 },
}

impl Op {
    /// The opcode at `at` (which must be inside `bytes`), and its length in bytes. An
    /// XZERO cut short by the end of the value reads `past_end` for its second byte.
    fn at(bytes: &[u8], at: usize, past_end: u8) -> (Op, usize) {
        let first = bytes[at];
        if is_val(first) {
            let (value, run) = val_parts(first);
            (Op::Val { value, run }, 1)
        } else if first & 0x40 != 0 {
            let second = bytes.get(at + 1).copied().unwrap_or(past_end);
            let run = ((u32::from(first & 0x3f) << 8) | u32::from(second)) + 1;
            (Op::XZero { run }, 2)
        } else {
            (
                Op::Zero {
                    run: u32::from(first & 0x3f) + 1,
                },
                1,
            )
        }
    }

    fn run(self) -> u32 {
        match self {
            Op::Zero { run } | Op::XZero { run } | Op::Val { run, .. } => run,
        }
    }
}

fn is_val(byte: u8) -> bool {
    byte & 0x80 != 0
}

/// A VAL opcode's value and run.
fn val_parts(byte: u8) -> (u8, u32) {
    (((byte >> 2) & 0x1f) + 1, u32::from(byte & 0x3) + 1)
}

fn val_byte(value: u8, run: u32) -> u8 {
    0x80 | ((value - 1) << 2) | (run - 1) as u8
}

fn push_xzero(out: &mut impl Extend<u8>, run: u32) {
    let stored = run - 1;
    out.extend([0x40 | (stored >> 8) as u8, (stored & 0xff) as u8]);
}

/// A run of `run` zero registers in the shortest opcode Redis would pick for a split.
fn push_zeros(out: &mut impl Extend<u8>, run: u32) {
    if run > SPARSE_ZERO_RUN_MAX {
        push_xzero(out, run);
    } else {
        out.extend([(run - 1) as u8]);
    }
}

/// Walks a sparse sketch's opcodes, calling `run(first_register, op)` for each, as
/// Redis's readers do (the conversion to dense, the histogram, the merges). Whether the
/// opcodes cover exactly the 16384 registers: the walk stops at the first opcode that
/// would run past the last register (Redis 7.0.15 as Debian ships it, with the fix for
/// CVE-2025-32023, checks every opcode so; the release before checked VAL runs only).
fn walk_sparse(sketch: &[u8], past_end: u8, mut run: impl FnMut(usize, Op)) -> bool {
    let mut register: u64 = 0;
    let mut at = HEADER_BYTES;
    while at < sketch.len() {
        let (op, len) = Op::at(sketch, at, past_end);
        if register + u64::from(op.run()) > REGISTERS as u64 {
            return false;
        }
        run(register as usize, op);
        register += u64::from(op.run());
        at += len;
    }
    register == REGISTERS as u64
}

/// The dense form of a stored sparse sketch (the header copied whole, the encoding
/// changed), or `Corrupt`.
pub fn sparse_to_dense(sketch: &[u8]) -> Result<Vec<u8>, Corrupt> {
    sparse_to_dense_with(sketch, 0)
}

fn sparse_to_dense_with(sketch: &[u8], past_end: u8) -> Result<Vec<u8>, Corrupt> {
    let mut dense = vec![0u8; DENSE_BYTES];
    dense[..HEADER_BYTES].copy_from_slice(&sketch[..HEADER_BYTES]);
    dense[ENCODING_AT] = Encoding::Dense.byte();
    let registers = &mut dense[HEADER_BYTES..];
    let whole = walk_sparse(sketch, past_end, |first, op| {
        if let Op::Val { value, run } = op {
            for index in first..first + run as usize {
                dense_put(registers, index, value);
            }
        }
    });
    if whole { Ok(dense) } else { Err(Corrupt) }
}

/// A sketch being changed by one command: its bytes, and the byte Redis would find just
/// past them.
///
/// Redis's strings end in a zero byte, and a sparse sketch whose last opcode is an XZERO
/// cut short (a damaged value) reads it as that opcode's second byte. Splitting such an
/// opcode writes the new opcodes whole from where it starts while the length grows by
/// their length less two: the last byte written lands past the new end, where the next
/// reader of the same buffer finds it. This tracks that byte for as long as the command
/// works on the value. A stored value has none (the next command reads a zero), where
/// Redis keeps it in the buffer: the one difference left, and only for such values.
pub struct Sketch {
    bytes: Vec<u8>,
    past_end: u8,
}

impl Sketch {
    /// A sketch (checked by `encoding_of`) to change.
    pub fn new(bytes: Vec<u8>) -> Sketch {
        Sketch { bytes, past_end: 0 }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn encoding(&self) -> Encoding {
        if self.bytes[ENCODING_AT] == Encoding::Dense.byte() {
            Encoding::Dense
        } else {
            Encoding::Sparse
        }
    }

    /// Marks the cached cardinality stale (see `invalidate_cache`).
    pub fn invalidate_cache(&mut self) {
        invalidate_cache(&mut self.bytes);
    }

    /// Turns a sparse sketch dense (PFMERGE with a dense input), or `Corrupt`, unchanged.
    pub fn make_dense(&mut self) -> Result<(), Corrupt> {
        if self.encoding() == Encoding::Sparse {
            self.bytes = sparse_to_dense_with(&self.bytes, self.past_end)?;
            self.past_end = 0;
        }
        Ok(())
    }

    /// Adds `element`: whether a register changed. A sparse sketch may turn dense.
    pub fn add(&mut self, element: &[u8], sparse_bytes_max: usize) -> Result<bool, Corrupt> {
        let (index, count) = register_and_count(element);
        self.raise(index, count, sparse_bytes_max)
    }

    /// Raises register `index` to `count` if it is lower: whether it did. A sparse sketch
    /// may turn dense.
    pub fn raise(
        &mut self,
        index: usize,
        count: u8,
        sparse_bytes_max: usize,
    ) -> Result<bool, Corrupt> {
        match self.encoding() {
            Encoding::Dense => Ok(dense_raise(&mut self.bytes, index, count)),
            Encoding::Sparse => self.sparse_raise(index, count, sparse_bytes_max),
        }
    }

    /// Redis's `hllSparseSet`: `Ok(true)` if a register changed (the sketch may now be
    /// dense), `Ok(false)` if it already held as much, `Corrupt` if the opcodes do not
    /// reach `index`, or if a promotion finds them broken (nothing is changed then).
    fn sparse_raise(
        &mut self,
        index: usize,
        count: u8,
        sparse_bytes_max: usize,
    ) -> Result<bool, Corrupt> {
        if count > SPARSE_VAL_VALUE_MAX {
            return self.promote(index, count);
        }
        let sketch = &mut self.bytes;
        let index = index as u64;
        // Step 1: the opcode that covers `index`, the one before it, and its first
        // register.
        let mut at = HEADER_BYTES;
        let mut previous = None;
        let mut first: u64 = 0;
        let mut found = None;
        while at < sketch.len() {
            let (op, len) = Op::at(sketch, at, self.past_end);
            if index < first + u64::from(op.run()) {
                found = Some((op, len));
                break;
            }
            previous = Some(at);
            at += len;
            first += u64::from(op.run());
        }
        let Some((op, op_len)) = found else {
            return Err(Corrupt);
        };
        let last = first + u64::from(op.run()) - 1;

        // Step 2: the cases that change one byte in place.
        match op {
            Op::Val { value, .. } if value >= count => return Ok(false),
            Op::Val { run: 1, .. } | Op::Zero { run: 1 } => {
                sketch[at] = val_byte(count, 1);
                self.merge_neighbours(previous.unwrap_or(HEADER_BYTES));
                self.invalidate_cache();
                return Ok(true);
            }
            _ => {}
        }

        // Step 3: split the opcode into up to three (zeros or the old value before, the
        // new value, zeros or the old value after).
        let mut split: smallvec::SmallVec<[u8; 5]> = smallvec::SmallVec::new();
        let before = (index - first) as u32;
        let after = (last - index) as u32;
        match op {
            Op::Val { value, .. } => {
                if before > 0 {
                    split.push(val_byte(value, before));
                }
                split.push(val_byte(count, 1));
                if after > 0 {
                    split.push(val_byte(value, after));
                }
            }
            Op::Zero { .. } | Op::XZero { .. } => {
                if before > 0 {
                    push_zeros(&mut split, before);
                }
                split.push(val_byte(count, 1));
                if after > 0 {
                    push_zeros(&mut split, after);
                }
            }
        }
        let old_len = sketch.len();
        let new_len = old_len + split.len() - op_len;
        if new_len > old_len && new_len > sparse_bytes_max {
            return self.promote(index as usize, count);
        }
        if at + op_len > old_len {
            // An XZERO cut short counted two bytes but had one: the new opcodes are
            // written whole from where it starts while the value grows by their length
            // less two, so their last byte lands just past the new end.
            sketch.truncate(at);
            sketch.extend_from_slice(&split);
            self.past_end = sketch.pop().expect("the split wrote opcodes");
        } else {
            sketch.splice(at..at + op_len, split);
            // Redis's new length ends in its zero byte.
            self.past_end = 0;
        }
        debug_assert_eq!(sketch.len(), new_len);

        // Step 4: adjacent VALs of one value merge.
        self.merge_neighbours(previous.unwrap_or(HEADER_BYTES));
        self.invalidate_cache();
        Ok(true)
    }

    /// Merges adjacent VAL opcodes of the same value whose runs fit one opcode, looking
    /// at up to five opcodes from `from` (the opcode before the one changed), as Redis
    /// does: the sparse form is not always minimal, and its exact bytes are Redis's.
    fn merge_neighbours(&mut self, from: usize) {
        let sketch = &mut self.bytes;
        let mut at = from;
        let mut looks = 5;
        while at < sketch.len() && looks > 0 {
            looks -= 1;
            let byte = sketch[at];
            if !is_val(byte) {
                at += if byte & 0x40 != 0 { 2 } else { 1 };
                continue;
            }
            if at + 1 < sketch.len() && is_val(sketch[at + 1]) {
                let (value, run) = val_parts(byte);
                let (next_value, next_run) = val_parts(sketch[at + 1]);
                if value == next_value && run + next_run <= SPARSE_VAL_RUN_MAX {
                    sketch[at + 1] = val_byte(value, run + next_run);
                    sketch.remove(at);
                    // Redis shortens its string, which zeroes the byte past the end.
                    self.past_end = 0;
                    // Stay: the merged opcode may merge with the next one too.
                    continue;
                }
            }
            at += 1;
        }
    }

    /// Turns a sparse sketch dense and raises the register there (Redis's `promote:`).
    fn promote(&mut self, index: usize, count: u8) -> Result<bool, Corrupt> {
        self.make_dense()?;
        // A promotion only happens for a register that needs raising, so this raises it
        // (Redis asserts as much).
        dense_raise(&mut self.bytes, index, count);
        Ok(true)
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

// ---------------------------------------------------------------------------------------
// Counting and merging.

/// How many registers hold each value (values above 63 cannot occur: registers are six
/// bits, or bytes of at most 63 in a merge).
type Histogram = [u32; 64];

fn histogram(sketch: &[u8]) -> Result<Histogram, Corrupt> {
    let mut counts = [0u32; 64];
    if sketch[ENCODING_AT] == Encoding::Dense.byte() {
        let registers = &sketch[HEADER_BYTES..];
        for index in 0..REGISTERS {
            counts[dense_get(registers, index) as usize] += 1;
        }
        return Ok(counts);
    }
    let whole = walk_sparse(sketch, 0, |_, op| {
        let slot = match op {
            Op::Val { value, .. } => value as usize,
            Op::Zero { .. } | Op::XZero { .. } => 0,
        };
        counts[slot] += op.run();
    });
    if whole { Ok(counts) } else { Err(Corrupt) }
}

/// The cardinality a sketch estimates, recounted from its registers.
pub fn count(sketch: &[u8]) -> Result<u64, Corrupt> {
    histogram(sketch).map(|counts| estimate(&counts))
}

/// Registers one byte each, the maximum over several sketches (PFCOUNT of several keys,
/// PFMERGE).
pub struct MaxRegisters(Box<[u8; REGISTERS]>);

impl Default for MaxRegisters {
    fn default() -> Self {
        MaxRegisters(Box::new([0; REGISTERS]))
    }
}

impl MaxRegisters {
    /// Takes in a sketch (checked by `encoding_of`). A broken sparse one is `Corrupt`;
    /// what it added before the break stays, as in Redis (the caller stops anyway).
    pub fn merge(&mut self, sketch: &[u8]) -> Result<(), Corrupt> {
        let max = &mut self.0;
        if sketch[ENCODING_AT] == Encoding::Dense.byte() {
            let registers = &sketch[HEADER_BYTES..];
            for (index, slot) in max.iter_mut().enumerate() {
                *slot = (*slot).max(dense_get(registers, index));
            }
            return Ok(());
        }
        let whole = walk_sparse(sketch, 0, |first, op| {
            if let Op::Val { value, run } = op {
                for slot in &mut max[first..first + run as usize] {
                    *slot = (*slot).max(value);
                }
            }
        });
        if whole { Ok(()) } else { Err(Corrupt) }
    }

    /// The cardinality of the union.
    pub fn count(&self) -> u64 {
        let mut counts = [0u32; 64];
        for &value in self.0.iter() {
            counts[value as usize & 63] += 1;
        }
        estimate(&counts)
    }

    pub fn get(&self, index: usize) -> u8 {
        self.0[index]
    }
}

/// Ertl's improved estimator ("New cardinality estimation algorithms for HyperLogLog
/// sketches", arXiv:1702.01284), as Redis 5 and later compute it, operation for operation
/// (the order of floating-point operations shows in the last digit).
fn estimate(counts: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let q = RUN_BITS as usize;
    let mut z = m * tau((m - f64::from(counts[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(counts[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(counts[0]) / m);
    // Redis: 0.5 / ln 2, the limit of alpha for many registers.
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let estimate = (ALPHA_INF * m * m / z).round();
    // Redis rounds with `llroundl`; on x86-64 an infinite or too large result comes back
    // as the most negative 64-bit integer, which it then treats as unsigned. Only a
    // hand-made sketch (every register 51, say) gets there.
    if estimate.is_finite() && estimate < 9_223_372_036_854_775_808.0 {
        estimate as u64
    } else {
        1 << 63
    }
}

fn sigma(x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut x = x;
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            return z;
        }
    }
}

fn tau(x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut x = x;
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        // Redis writes pow(1 - x, 2), which compilers turn into this product.
        let gap = 1.0 - x;
        z -= gap * gap * y;
        if previous == z {
            return z / 3.0;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Debugging aids.

/// PFDEBUG DECODE's text of a sparse sketch: `z:N` (ZERO), `Z:N` (XZERO), `v:V,N` (VAL).
pub fn decode_sparse(sketch: &[u8]) -> String {
    let mut words = Vec::new();
    let mut at = HEADER_BYTES;
    while at < sketch.len() {
        let (op, len) = Op::at(sketch, at, 0);
        words.push(match op {
            Op::Zero { run } => format!("z:{run}"),
            Op::XZero { run } => format!("Z:{run}"),
            Op::Val { value, run } => format!("v:{value},{run}"),
        });
        at += len;
    }
    words.join(" ")
}

/// PFSELFTEST: register access round trips, then the estimate's error at cardinalities
/// 1, 10, ..., 10^7 with a dense sketch and one that starts sparse (which must agree and
/// must stay sparse while small). `Err` holds Redis's TESTFAILED text.
pub fn self_test(sparse_bytes_max: usize, mut random: impl FnMut() -> u64) -> Result<(), String> {
    let mut dense = vec![0u8; DENSE_BYTES];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (index, slot) in expected.iter_mut().enumerate() {
            let value = (random() & REGISTER_MAX) as u8;
            *slot = value;
            dense_put(&mut dense[HEADER_BYTES..], index, value);
        }
        for (index, &want) in expected.iter().enumerate() {
            let got = dense_get(&dense[HEADER_BYTES..], index);
            if got != want {
                return Err(format!(
                    "TESTFAILED Register {index} should be {want} but is {got}"
                ));
            }
        }
    }

    dense[HEADER_BYTES..].fill(0);
    let mut sparse = Sketch::new(new_sparse());
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = random();
    for j in 1..=10_000_000u64 {
        let element = (j ^ seed).to_le_bytes();
        let (index, value) = register_and_count(&element);
        dense_raise(&mut dense, index, value);
        // A sketch passing `encoding_of`, changed only here: it cannot break.
        let _ = sparse.raise(index, value, sparse_bytes_max);
        if j != checkpoint {
            continue;
        }
        if j < (sparse_bytes_max / 2) as u64 && sparse.encoding() != Encoding::Sparse {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let dense_count = count(&dense).unwrap_or(0);
        if count(sparse.bytes()).ok() != Some(dense_count) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let error = (checkpoint as i64 - dense_count as i64).unsigned_abs();
        let mut error_max = (relative_error * 6.0 * checkpoint as f64).ceil() as u64;
        // Collisions make a large error at 10 likely enough to fail now and then.
        if j == 10 {
            error_max = 1;
        }
        if error > error_max {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{error}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sparse sketch of the given opcodes.
    fn sparse_of(ops: &[u8]) -> Vec<u8> {
        let mut sketch = new_sparse();
        sketch.truncate(HEADER_BYTES);
        sketch.extend_from_slice(ops);
        sketch
    }

    #[test]
    fn dense_registers_round_trip_without_touching_neighbours() {
        let mut registers = vec![0u8; DENSE_BYTES - HEADER_BYTES];
        for index in 0..REGISTERS {
            dense_put(&mut registers, index, (index % 64) as u8);
        }
        for index in 0..REGISTERS {
            assert_eq!(dense_get(&registers, index), (index % 64) as u8);
        }
        dense_put(&mut registers, REGISTERS - 1, 63);
        assert_eq!(dense_get(&registers, REGISTERS - 1), 63);
        assert_eq!(
            dense_get(&registers, REGISTERS - 2),
            ((REGISTERS - 2) % 64) as u8
        );
    }

    #[test]
    fn an_empty_sketch_counts_zero_and_converts() {
        let sketch = new_sparse();
        assert_eq!(encoding_of(&sketch), Ok(Encoding::Sparse));
        assert_eq!(count(&sketch), Ok(0));
        let dense = sparse_to_dense(&sketch).unwrap();
        assert_eq!(encoding_of(&dense), Ok(Encoding::Dense));
        assert_eq!(count(&dense), Ok(0));
        assert_eq!(decode_sparse(&sketch), "Z:16384");
    }

    #[test]
    fn a_split_xzero_becomes_zeros_value_zeros() {
        let mut sketch = Sketch::new(new_sparse());
        let decoded = |sketch: &Sketch| decode_sparse(sketch.bytes());
        assert_eq!(sketch.raise(1000, 2, 3000), Ok(true));
        assert_eq!(decoded(&sketch), "Z:1000 v:2,1 Z:15383");
        assert_eq!(sketch.raise(1001, 2, 3000), Ok(true));
        assert_eq!(decoded(&sketch), "Z:1000 v:2,2 Z:15382");
        assert_eq!(sketch.raise(1001, 1, 3000), Ok(false));
        assert_eq!(sketch.raise(1003, 2, 3000), Ok(true));
        assert_eq!(decoded(&sketch), "Z:1000 v:2,2 z:1 v:2,1 Z:15380");
        assert_eq!(sketch.raise(1002, 2, 3000), Ok(true));
        assert_eq!(decoded(&sketch), "Z:1000 v:2,4 Z:15380");
        assert_eq!(cached_cardinality(sketch.bytes()), None);
    }

    #[test]
    fn a_value_above_32_or_a_full_budget_promotes() {
        let mut sketch = Sketch::new(new_sparse());
        assert_eq!(sketch.raise(5, 33, 3000), Ok(true));
        assert_eq!(encoding_of(sketch.bytes()), Ok(Encoding::Dense));
        assert_eq!(dense_registers(sketch.bytes())[5], 33);

        let mut sketch = Sketch::new(new_sparse());
        // Splitting the XZERO grows the value by three bytes: past a budget of 20.
        assert_eq!(sketch.raise(100, 1, 20), Ok(true));
        assert_eq!(encoding_of(sketch.bytes()), Ok(Encoding::Dense));
    }

    #[test]
    fn broken_sparse_sketches_are_corrupt() {
        // Too few registers.
        let short = sparse_of(&[0x40, 0x00]);
        assert_eq!(count(&short), Err(Corrupt));
        assert_eq!(sparse_to_dense(&short), Err(Corrupt));
        assert!(MaxRegisters::default().merge(&short).is_err());
        // A register past the opcodes cannot be raised.
        let mut short = Sketch::new(short);
        assert_eq!(short.raise(5000, 1, 3000), Err(Corrupt));
        // Too many: a VAL run past the last register.
        let long = sparse_of(&[0x7f, 0xff, 0x80]);
        assert_eq!(count(&long), Err(Corrupt));
        assert!(MaxRegisters::default().merge(&long).is_err());
        // No opcodes at all.
        let mut empty = Sketch::new(sparse_of(&[]));
        assert_eq!(empty.raise(0, 1, 3000), Err(Corrupt));
    }

    #[test]
    fn an_xzero_cut_short_reads_the_byte_past_the_end() {
        // 0x7f alone: an XZERO of (0x3f << 8 | the byte past the end) + 1 registers.
        let cut = sparse_of(&[0x7f]);
        assert_eq!(decode_sparse(&cut), "Z:16129");
        let mut sketch = Sketch::new(cut);
        // Splitting it in the middle writes ZERO-ish, VAL, XZERO from its first byte
        // while the value grows by three less two: the XZERO's second byte lies past
        // the end, and the next reader of this buffer sees it there.
        assert_eq!(sketch.raise(100, 1, 3000), Ok(true));
        assert_eq!(sketch.bytes().len(), HEADER_BYTES + 4);
        assert_eq!(decode_sparse(sketch.bytes()), "Z:100 v:1,1 Z:15873");
        let low_byte = ((16129 - 100 - 1 - 1) & 0xff) as u8;
        assert_eq!(sketch.past_end, low_byte);
        assert_eq!(
            Op::at(sketch.bytes(), HEADER_BYTES + 3, sketch.past_end)
                .0
                .run(),
            16028
        );
    }

    #[test]
    fn estimates_are_close_for_small_sets() {
        let mut sketch = Sketch::new(new_sparse());
        for i in 0..1000u32 {
            sketch.add(i.to_string().as_bytes(), 3000).unwrap();
        }
        let estimate = count(sketch.bytes()).unwrap() as i64;
        assert!((estimate - 1000).abs() < 50, "{estimate}");
    }
}
