//! Online DNSSEC signing: keys, signatures, the NSEC/NSEC3 chain.

pub mod keys;
