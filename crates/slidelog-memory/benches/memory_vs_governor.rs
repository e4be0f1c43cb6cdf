//! Memory store against governor (written next).
fn main() {}
