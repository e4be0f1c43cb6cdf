//! The `slidelog` binary as a library: the command line, the service (HTTP and
//! Envoy gRPC), and the `check`, `inspect` and `bench` subcommands. Each
//! subcommand lives in its own module under [`cli`]; the service is a library
//! function that tests start on port 0.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
