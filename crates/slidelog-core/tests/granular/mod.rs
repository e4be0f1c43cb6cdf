//! The plain model of granular limits and its differential run, shared by
//! the engine's, the memory store's and the module's tests.

pub mod model;
pub mod run;
