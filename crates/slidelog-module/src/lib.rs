//! slidelog's sliding window log as a native Redis / Valkey module
//! (docs/design.md §4.3): `slidelog_core::Log` as a data type, decided by
//! `slidelog_core::engine`, so the module and the memory store answer alike
//! by construction.
//!
//! Build with `cargo build --release -p slidelog-module` and load
//! `target/release/libslidelog_module.so` with `--loadmodule` into Redis
//! >= 7.0 or Valkey >= 8. The commands are documented in [`commands`].
//!
//! All `unsafe` code is in [`ffi`]; everything else is safe Rust.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod adopt;
pub mod all;
pub mod args;
pub mod clock;
pub mod commands;
pub mod error;
pub mod ffi;
pub mod granules;
pub mod rewrite;

/// Logs live in the server's allocator, so `used_memory`, `maxmemory` and
/// `INFO memory` see them (the unit tests, outside a server, use the system's).
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: valkey_module::alloc::ValkeyAlloc = valkey_module::alloc::ValkeyAlloc;
