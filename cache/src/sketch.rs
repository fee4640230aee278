//! How often keys were seen, approximately: a count-min sketch of 4-bit
//! counters, halved periodically so that old popularity fades. It is the
//! frequency estimate of TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A
//! Highly Efficient Cache Admission Policy", ACM Transactions on Storage 13(4),
//! 2017), as Caffeine and moka use it; the cache asks it whether a new entry
//! is worth the one it would evict.
//!
//! Keys are given as 64-bit hashes (the caller hashes with a per-cache random
//! key, so that no one can choose names that share counters). A sketch
//! overestimates, never underestimates, a count since the last halving, up to
//! [`MAX_COUNT`].

/// Rows (hash functions) of the sketch: an estimate is the least of this many
/// counters.
const DEPTH: usize = 4;

/// The largest value a counter holds (4 bits).
pub(crate) const MAX_COUNT: u8 = 15;

/// Counters per row at least: 8 KiB of sketch, so that in a small cache the
/// keys seen between halvings (10 × this many) rarely share all four counters.
const MIN_WIDTH: usize = 4096;

/// Counters per row at most: 4 rows of 2^22 half-bytes are 8 MiB, whatever
/// the slot count.
const MAX_WIDTH: usize = 1 << 22;

/// Additions before every counter is halved, per counter of a row: TinyLFU's
/// sample size W, here 10 × the row width (Caffeine: 10 × the maximum size).
const SAMPLE_PER_COUNTER: usize = 10;

/// Every 4-bit counter of a word but its top bit: `(w >> 1) & HALF_MASK`
/// halves all 16 counters of `w` at once.
const HALF_MASK: u64 = 0x7777_7777_7777_7777;

/// A count-min sketch of [`DEPTH`] rows of 4-bit counters, 16 to a `u64`,
/// laid out in 64-byte blocks of 8 words: a key's counters all lie in one
/// block (one cache line to fetch per miss, not four), two words per row, as
/// in Caffeine's `FrequencySketch`.
#[derive(Debug)]
pub(crate) struct Sketch {
    /// `width / 32` blocks of 8 words; words `2i` and `2i + 1` of a block
    /// hold row `i`.
    words: Vec<u64>,
    /// Counters per row, a power of two.
    width: usize,
    /// Increments since the last halving (halved with the counters).
    additions: usize,
    /// Increments that trigger a halving.
    sample: usize,
}

impl Sketch {
    /// A sketch for a cache of `slots` entries: rows of the next power of two
    /// at or above `slots` counters, within [`MIN_WIDTH`]..=[`MAX_WIDTH`].
    pub(crate) fn new(slots: usize) -> Sketch {
        let width = slots
            .clamp(MIN_WIDTH, MAX_WIDTH)
            .checked_next_power_of_two()
            .unwrap_or(MAX_WIDTH)
            .min(MAX_WIDTH);
        Sketch {
            words: vec![0; DEPTH * width / 16],
            width,
            additions: 0,
            sample: SAMPLE_PER_COUNTER * width,
        }
    }

    /// Counters per row.
    #[cfg(test)]
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// The counter of `hash` in each row, as (word index, bit shift): the
    /// low 32 bits of `hash` pick the block; of the high 32, bit `i` picks row
    /// `i`'s word in it and bits `4 + 4i..8 + 4i` the counter in that word.
    fn positions(&self, hash: u64) -> [(usize, u32); DEPTH] {
        let blocks = self.width / 32;
        let block = (hash as u32 as usize) & (blocks - 1);
        let high = hash >> 32;
        std::array::from_fn(|row| {
            let word = block * 8 + row * 2 + ((high >> row) & 1) as usize;
            // A 4-bit counter index times 4: below 64.
            let shift = ((high >> (4 + 4 * row)) & 0xf) as u32 * 4;
            (word, shift)
        })
    }

    /// Counts one more sighting of `hash` (counters stop at [`MAX_COUNT`]);
    /// halves every counter when the sample is complete.
    pub(crate) fn increment(&mut self, hash: u64) {
        for (word, shift) in self.positions(hash) {
            if (self.words[word] >> shift) & 0xf < u64::from(MAX_COUNT) {
                self.words[word] += 1 << shift;
            }
        }
        self.additions += 1;
        if self.additions >= self.sample {
            self.halve();
        }
    }

    /// The estimated sightings of `hash` since the last halvings (each halving
    /// halves the count, rounding down).
    pub(crate) fn estimate(&self, hash: u64) -> u8 {
        self.positions(hash)
            .into_iter()
            .map(|(word, shift)| ((self.words[word] >> shift) & 0xf) as u8)
            .min()
            .unwrap_or(0)
    }

    /// Halves every counter (rounding down) and the addition count: TinyLFU's
    /// reset, which ages out what was popular long ago.
    pub(crate) fn halve(&mut self) {
        for word in &mut self.words {
            *word = (*word >> 1) & HALF_MASK;
        }
        self.additions /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash whose counters are the first of each row in block `block`.
    fn at(block: u32) -> u64 {
        u64::from(block)
    }

    #[test]
    fn width_is_a_power_of_two_within_bounds() {
        assert_eq!(Sketch::new(0).width(), 4096);
        assert_eq!(Sketch::new(4097).width(), 8192);
        assert_eq!(Sketch::new(100_000).width(), 131_072);
        assert_eq!(Sketch::new(usize::MAX).width(), 1 << 22);
        assert_eq!(Sketch::new(100_000).words.len(), 4 * 131_072 / 16);
        assert_eq!(Sketch::new(0).words.len(), 4 * 4096 / 16);
    }

    #[test]
    fn counts_each_key_apart_and_saturates_at_15() {
        let mut s = Sketch::new(0);
        let (a, b) = (at(0), at(1));
        assert_eq!(s.estimate(a), 0);
        for _ in 0..3 {
            s.increment(a);
        }
        s.increment(b);
        assert_eq!(s.estimate(a), 3);
        assert_eq!(s.estimate(b), 1);
        for _ in 0..20 {
            s.increment(b);
        }
        assert_eq!(s.estimate(b), 15);
        assert_eq!(s.estimate(a), 3);
    }

    /// Keys sharing a counter in some rows are told apart by the others: the
    /// estimate is the least of the four.
    #[test]
    fn the_least_counter_is_the_estimate() {
        let mut s = Sketch::new(0);
        // One block, row 0's first counter for both; in rows 1-3, the first
        // counter of the other word for `b`.
        let a = at(0);
        let b = 0b1110u64 << 32;
        for _ in 0..4 {
            s.increment(a);
        }
        s.increment(b);
        assert_eq!(s.estimate(a), 4);
        assert_eq!(s.estimate(b), 1);
    }

    #[test]
    fn halving_ages_every_counter() {
        let mut s = Sketch::new(0);
        let (a, b) = (at(0), at(1));
        for _ in 0..7 {
            s.increment(a);
        }
        s.increment(b);
        s.halve();
        assert_eq!(s.estimate(a), 3);
        assert_eq!(s.estimate(b), 0);
        assert_eq!(s.additions, 4);
    }

    /// The 40,960th addition of a 4096-wide sketch (10 × 4096) halves the
    /// counters.
    #[test]
    fn a_full_sample_halves_by_itself() {
        let mut s = Sketch::new(0);
        let a = at(0);
        let b = 0b1111u64 << 32;
        for _ in 0..10 {
            s.increment(a);
        }
        for _ in 0..40_949 {
            s.increment(b);
        }
        assert_eq!((s.estimate(a), s.estimate(b)), (10, 15));
        s.increment(b);
        assert_eq!((s.estimate(a), s.estimate(b)), (5, 7));
        assert_eq!(s.additions, 20_480);
    }
}
