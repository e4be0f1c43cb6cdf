//! The Redis store of slidelog (built in the Redis store issue).
#![forbid(unsafe_code)]
