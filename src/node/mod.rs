//! A node: the daemon (`run`) and one date's run (`run --once`), which build the pool the same
//! way.

pub mod daemon;
pub mod runner;
