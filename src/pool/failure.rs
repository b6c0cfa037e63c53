//! Why a render failed, and the one place where a failure becomes an outcome class: what can
//! succeed on a later attempt is retried (transient), what cannot is quarantined (permanent).
//! Sends are classified by their transports from the receiver's answer (see [`crate::delivery`]).

use crate::domain::outcome::ResponseClass;
use crate::report::artifact::ArtifactError;
use crate::report::render::RenderError;
use crate::report::source::SourceError;

/// Why a job could not be rendered into its artifact.
#[derive(Debug, thiserror::Error)]
pub(super) enum RenderFailure {
    #[error("report {0:?} is no longer configured")]
    Unconfigured(String),
    #[error("template {0:?} is not loaded")]
    NotLoaded(String),
    #[error("{}", .0.message())]
    Source(#[from] SourceError),
    #[error("render: {0}")]
    Template(#[from] RenderError),
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// An alert's value that is missing or not a number: another attempt would find the same.
    #[error("{0}")]
    Condition(String),
    /// Cut at its deadline, or stopped, before it ended.
    #[error("{0}")]
    Cut(String),
}

impl RenderFailure {
    /// Transient (retry within the budget) or permanent (quarantine now).
    pub(super) fn class(&self) -> ResponseClass {
        match self {
            // A source that timed out or answered 5xx, a store that did not answer: both may
            // work on the next attempt.
            RenderFailure::Source(SourceError::Transient(_))
            | RenderFailure::Artifact(_)
            | RenderFailure::Cut(_) => ResponseClass::Transient,
            // Bad data, a template that does not render it, a report removed from the
            // configuration: another attempt would fail the same way.
            RenderFailure::Source(SourceError::Permanent(_))
            | RenderFailure::Template(_)
            | RenderFailure::Condition(_)
            | RenderFailure::Unconfigured(_)
            | RenderFailure::NotLoaded(_) => ResponseClass::Permanent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let transient = RenderFailure::from(SourceError::Transient("503".into()));
        assert_eq!(transient.class(), ResponseClass::Transient);
        assert_eq!(transient.to_string(), "503");
        let permanent = RenderFailure::from(SourceError::Permanent("not JSON".into()));
        assert_eq!(permanent.class(), ResponseClass::Permanent);
        assert_eq!(
            RenderFailure::Unconfigured("w".into()).class(),
            ResponseClass::Permanent
        );
    }
}
