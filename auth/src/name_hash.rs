//! Case-insensitive hashing of names, shared by the query processor (a
//! response's key) and rate limiting (its buckets), below both.

/// A 64-bit mix of two words (splitmix64's finalizer over their sum).
#[inline]
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A case-insensitive hash of a name in wire form and a number (the qtype
/// for answers, 0 otherwise), for rate limiting ([`crate::rrl::RateLimiter::account`]) and the response kinds of [`crate::query::Response`]. Eight bytes at
/// a time with bit 5 set in each (which folds ASCII case; that it also folds
/// a few other byte pairs only makes rare names share a bucket).
#[inline]
pub fn name_key(wire: &[u8], extra: u16) -> u64 {
    const FOLD: u64 = 0x2020_2020_2020_2020;
    let mut h = u64::from(extra) ^ (wire.len() as u64) << 16;
    let mut chunks = wire.chunks_exact(8);
    for chunk in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        h = mix(h, u64::from_le_bytes(b) | FOLD);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(b) | FOLD);
    }
    h
}
