//! Build script (replaced when the Envoy protos are compiled).
fn main() {}
