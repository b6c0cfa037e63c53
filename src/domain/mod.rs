//! The domain's words and time: plain values every other layer speaks — keys, spans and the
//! injected clock, a job's window, cron rules, how a response was classed, what may be printed.
//! It uses nothing else of the crate.

pub mod bounce;
pub mod clock;
pub mod condition;
pub mod cron;
pub mod data_path;
pub mod duration;
pub mod keys;
pub mod outcome;
pub mod redact;
pub mod window;
pub mod words;
