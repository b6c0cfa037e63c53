//! Read models: what the ledger says, shaped for people and programs — the history behind
//! `show` and `dlq`, the JSON API's contract, and a report's preview.

pub mod api;
pub mod history;
pub mod preview;
pub mod recipients;
pub mod test_send;
