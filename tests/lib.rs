//! Integration tests live in `all/`; this crate has no library code.
