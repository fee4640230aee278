//! The catalog producer (RFC 9432 §4): in progress.
