//! How one attempt ended: the failure classes (ARCHITECTURE.md, "Failure classes"), which the
//! transports assign, the retry policy acts on and the ledger records.

use serde::Serialize;

/// How one attempt ended (ARCHITECTURE.md, "Failure classes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseClass {
    Accepted,
    RateLimited,
    Transient,
    Ambiguous,
    Permanent,
    Unknown,
}

impl ResponseClass {
    /// Every class, from accepted to unknown.
    pub const ALL: [ResponseClass; 6] = [
        ResponseClass::Accepted,
        ResponseClass::RateLimited,
        ResponseClass::Transient,
        ResponseClass::Ambiguous,
        ResponseClass::Permanent,
        ResponseClass::Unknown,
    ];

    /// A class dead letters can have, by its name (not `accepted`: nothing accepted is
    /// quarantined), or `None`.
    pub(crate) fn of_dead_letter(name: &str) -> Option<ResponseClass> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == name && *c != ResponseClass::Accepted)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ResponseClass::Accepted => "accepted",
            ResponseClass::RateLimited => "rate_limited",
            ResponseClass::Transient => "transient",
            ResponseClass::Ambiguous => "ambiguous",
            ResponseClass::Permanent => "permanent",
            ResponseClass::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> ResponseClass {
        match s {
            "accepted" => ResponseClass::Accepted,
            "rate_limited" => ResponseClass::RateLimited,
            "transient" => ResponseClass::Transient,
            "ambiguous" => ResponseClass::Ambiguous,
            "permanent" => ResponseClass::Permanent,
            _ => ResponseClass::Unknown,
        }
    }
}
