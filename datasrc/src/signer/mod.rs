//! Online DNSSEC signing: keys, signatures, the NSEC/NSEC3 chain.

pub mod keys;
pub mod policy;
pub mod rollover;
pub mod rrsig;
pub mod zone;
