//! The catalog consumer (RFC 9432 §5): in progress.
