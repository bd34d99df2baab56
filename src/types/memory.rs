//! What a value's structures take from the allocator, for MEMORY USAGE: the size class
//! jemalloc really hands out for a request, an estimate of a hash table's allocation from
//! its capacity, and the sampling MEMORY USAGE's `SAMPLES` asks for (measure a few
//! elements, scale by the count, as Redis's `objectComputeSize` does).
//!
//! Each collection type measures itself with these (`List::memory_usage` and its kin):
//! only the type knows its layout. The figures are Tessera's own structures, not what
//! Redis would use for the same value.

/// The bytes jemalloc hands out for a request of `bytes` (its size class); 0 for 0, where
/// no allocation is made.
pub fn allocation(bytes: usize) -> usize {
    if bytes == 0 {
        return 0;
    }
    // SAFETY: `nallocx` only computes a size class: it reads and writes no memory of
    // ours and allocates nothing; flags 0 ask for the default alignment.
    let class = unsafe { tikv_jemalloc_sys::nallocx(bytes, 0) };
    // 0: no size class fits (a request past jemalloc's largest): count the request.
    if class == 0 { bytes } else { class }
}

/// The allocation of an `Arc<T>`: its two counters and the value.
pub fn arc<T>() -> usize {
    allocation(2 * size_of::<usize>() + size_of::<T>())
}

/// The allocation of a `Box<T>`.
pub fn boxed<T>() -> usize {
    allocation(size_of::<T>())
}

/// hashbrown's control bytes beyond one per bucket (a group's width, so that a probe
/// may read past the end).
const CONTROL_GROUP_BYTES: usize = 16;

/// An estimate of the allocation of a hashbrown table (an `IndexMap`'s index, a
/// `HashMap`) that reports `capacity` and holds `bucket_bytes` per bucket: the buckets
/// are found again from the capacity (7/8 of a power of two, or one less than it below
/// eight buckets), each with its control byte, plus one group of trailing control bytes.
pub fn hash_table(capacity: usize, bucket_bytes: usize) -> usize {
    if capacity == 0 {
        return 0; // the empty singleton: no allocation
    }
    let buckets = if capacity < 8 {
        (capacity + 1).next_power_of_two()
    } else {
        (capacity.saturating_mul(8) / 7).next_power_of_two()
    };
    let data = buckets.saturating_mul(bucket_bytes).next_multiple_of(16);
    allocation(data + buckets + CONTROL_GROUP_BYTES)
}

/// What every element of a collection of `len` elements takes, measured by `measure` on
/// the first `samples` of them and scaled to `len` (all of them measured when `samples`
/// covers them: exact).
pub fn sampled<T>(
    elements: impl Iterator<Item = T>,
    len: usize,
    samples: usize,
    mut measure: impl FnMut(T) -> usize,
) -> usize {
    let mut measured = 0usize;
    let mut seen = 0usize;
    for element in elements.take(samples) {
        measured = measured.saturating_add(measure(element));
        seen += 1;
    }
    if seen == 0 || seen >= len {
        return measured;
    }
    (measured as f64 / seen as f64 * len as f64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_and_zero_allocates_nothing() {
        assert_eq!(allocation(0), 0);
        for bytes in [1, 7, 8, 9, 40, 100, 1000, 5000, 100_000] {
            let class = allocation(bytes);
            assert!(class >= bytes, "{bytes} → {class}");
            assert_eq!(allocation(class), class, "a size class is its own class");
        }
        assert_eq!(allocation(40), 48, "jemalloc's class for a 40-byte entry");
    }

    #[test]
    fn a_table_grows_by_powers_of_two_from_its_capacity() {
        assert_eq!(hash_table(0, 8), 0);
        // 3 elements: 4 buckets; 7: 8; 14: 16; 28: 32.
        let small = hash_table(3, 8);
        assert!(small >= 4 * 8 + 4 + 16);
        assert!(hash_table(7, 8) > small);
        assert!(hash_table(28, 8) >= 32 * 9 + 16);
        assert!(hash_table(28, 8) < hash_table(29, 8));
    }

    #[test]
    fn sampling_scales_what_it_measured() {
        let sizes = [10usize, 20, 30, 40];
        assert_eq!(sampled(sizes.iter(), 4, usize::MAX, |s| *s), 100);
        assert_eq!(sampled(sizes.iter(), 4, 4, |s| *s), 100);
        // The first two average 15: four of them are 60.
        assert_eq!(sampled(sizes.iter(), 4, 2, |s| *s), 60);
        assert_eq!(sampled(std::iter::empty::<usize>(), 0, 5, |s| s), 0);
    }
}
