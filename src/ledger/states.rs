//! The job and delivery states, and the sets of them the ledger asks about, each written once.
//! SQL that needs a set gets its text from here, made at compile time by [`state_set!`]: an
//! `IN` list, or the `OR` of equalities that SQLite's planner matches a partial index by. No
//! statement spells a set by hand; `tests/it/ledger_states.rs` checks that each table's CHECK
//! constraint and each queue index agree with these on both backends.
//!
//! Adding a state: its variant, `as_str`, the sets it belongs to, one migration per backend
//! for the CHECK constraint, and the transitions that use it.

use serde::Serialize;

use super::LedgerError;

/// The state of a job (ARCHITECTURE.md, "State machines").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Waiting for `ready_at`; the scheduler, `enqueue`, a render retry or a redrive put it here.
    Ready,
    /// Waiting for its report's data (`ready_when`): probed again at `ready_at`, until its
    /// deadline (`wait_until`). Holds no lease between probes.
    Waiting,
    /// Leased by a worker that is fetching and rendering it.
    Rendering,
    /// Rendered; its deliveries are in flight.
    Delivering,
    /// Every delivery was sent.
    Done,
    /// The render failed for good, or a delivery was quarantined. An operator may redrive it.
    Quarantined,
    /// Withdrawn by an operator.
    Cancelled,
    /// Ended with nothing to send (its data was empty or late); the reason is its `last_error`.
    Skipped,
}

impl JobState {
    pub const ALL: [JobState; 8] = [
        JobState::Ready,
        JobState::Waiting,
        JobState::Rendering,
        JobState::Delivering,
        JobState::Done,
        JobState::Quarantined,
        JobState::Cancelled,
        JobState::Skipped,
    ];

    /// Not finished: due or waiting, leased for its render, or delivering.
    pub const LIVE: &[JobState] = &[
        JobState::Ready,
        JobState::Waiting,
        JobState::Rendering,
        JobState::Delivering,
    ];

    /// What a claim takes once due (`jobs_due` indexes exactly these).
    pub const CLAIMABLE: &[JobState] = &[JobState::Ready, JobState::Waiting];

    /// Finished: never leased again, and what retention may retire once no delivery of it is
    /// unfinished.
    pub(crate) const TERMINAL: &[JobState] = &[
        JobState::Done,
        JobState::Quarantined,
        JobState::Cancelled,
        JobState::Skipped,
    ];

    /// What an operator may cancel: nothing of it is leased or on its way.
    pub(crate) const CANCELLABLE: &[JobState] =
        &[JobState::Ready, JobState::Waiting, JobState::Quarantined];

    /// A job whose quarantined deliveries may be redriven one by one: it was rendered.
    pub(crate) const RENDERED: &[JobState] =
        &[JobState::Delivering, JobState::Done, JobState::Quarantined];

    pub const fn as_str(self) -> &'static str {
        match self {
            JobState::Ready => "ready",
            JobState::Waiting => "waiting",
            JobState::Rendering => "rendering",
            JobState::Delivering => "delivering",
            JobState::Done => "done",
            JobState::Quarantined => "quarantined",
            JobState::Cancelled => "cancelled",
            JobState::Skipped => "skipped",
        }
    }

    pub fn parse(s: &str) -> Result<JobState, LedgerError> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| LedgerError::Corrupt(format!("unknown job state {s:?}")))
    }

    pub fn is_terminal(self) -> bool {
        JobState::TERMINAL.contains(&self)
    }
}

/// The state of one delivery (and of one send of an owners' notice). `sent` never moves back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Pending,
    Sending,
    Sent,
    Quarantined,
    /// Not sent, for good: its recipient is suppressed (a bounce, a complaint, an
    /// unsubscribe or an operator said so).
    Suppressed,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 5] = [
        DeliveryState::Pending,
        DeliveryState::Sending,
        DeliveryState::Sent,
        DeliveryState::Quarantined,
        DeliveryState::Suppressed,
    ];

    /// Not finished: due, or leased and maybe on its way.
    pub(crate) const UNFINISHED: &[DeliveryState] =
        &[DeliveryState::Pending, DeliveryState::Sending];

    /// Finished until an operator redrives it.
    pub(crate) const TERMINAL: &[DeliveryState] = &[
        DeliveryState::Sent,
        DeliveryState::Quarantined,
        DeliveryState::Suppressed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Sending => "sending",
            DeliveryState::Sent => "sent",
            DeliveryState::Quarantined => "quarantined",
            DeliveryState::Suppressed => "suppressed",
        }
    }

    pub fn parse(s: &str) -> Result<DeliveryState, LedgerError> {
        DeliveryState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| LedgerError::Corrupt(format!("unknown delivery state {s:?}")))
    }

    pub fn is_terminal(self) -> bool {
        DeliveryState::TERMINAL.contains(&self)
    }
}

/// How [`state_set!`] writes a set: `'a', 'b'` (for `state IN (…)`), or
/// `state = 'a' OR state = 'b'`, the form SQLite proves a partial index's `OR` predicate by.
#[derive(Clone, Copy)]
pub(super) enum Form {
    List,
    AnyOf(&'static str),
}

/// The length of `names` written in `form`.
pub(super) const fn set_len(names: &[&str], form: Form) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < names.len() {
        if i > 0 {
            len += match form {
                Form::List => 2,
                Form::AnyOf(_) => 4,
            };
        }
        if let Form::AnyOf(column) = form {
            len += column.len() + 3;
        }
        len += names[i].len() + 2;
        i += 1;
    }
    len
}

/// `names` written in `form`, into exactly [`set_len`] bytes.
pub(super) const fn set_text<const N: usize>(names: &[&str], form: Form) -> [u8; N] {
    let mut out = Text::<N>::new();
    let mut i = 0;
    while i < names.len() {
        if i > 0 {
            out = out.push(match form {
                Form::List => ", ",
                Form::AnyOf(_) => " OR ",
            });
        }
        if let Form::AnyOf(column) = form {
            out = out.push(column).push(" = ");
        }
        out = out.push("'").push(names[i]).push("'");
        i += 1;
    }
    out.done()
}

/// The total length of `parts`.
pub(super) const fn joined_len(parts: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

/// `parts` one after another, into exactly [`joined_len`] bytes.
pub(super) const fn joined<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = Text::<N>::new();
    let mut i = 0;
    while i < parts.len() {
        out = out.push(parts[i]);
        i += 1;
    }
    out.done()
}

/// Bytes made of whole `str`s, as a `str` (checked at compile time).
pub(super) const fn utf8(bytes: &'static [u8]) -> &'static str {
    match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(_) => panic!("SQL text made of strs is UTF-8"),
    }
}

/// A fixed buffer filled at compile time; a statement's length is counted first, so it is
/// filled exactly.
struct Text<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> Text<N> {
    const fn new() -> Text<N> {
        Text {
            bytes: [0; N],
            len: 0,
        }
    }

    const fn push(mut self, s: &str) -> Text<N> {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            self.bytes[self.len] = b[i];
            self.len += 1;
            i += 1;
        }
        self
    }

    const fn done(self) -> [u8; N] {
        assert!(self.len == N, "SQL text filled to its counted length");
        self.bytes
    }
}

/// The SQL text of a set of states (`JobState::TERMINAL`, …), made at compile time:
/// `state_set!(JobState::TERMINAL)` is `'done', 'quarantined', 'cancelled', 'skipped'`;
/// `state_set!(JobState::CLAIMABLE, any_of "state")` is `state = 'ready' OR state = 'waiting'`.
macro_rules! state_set {
    ($set:expr) => {
        state_set!(@form $set, $crate::ledger::states::Form::List)
    };
    ($set:expr, any_of $column:literal) => {
        state_set!(@form $set, $crate::ledger::states::Form::AnyOf($column))
    };
    (@form $set:expr, $form:expr) => {{
        const SET: &[&str] = &{
            let mut names = [""; $set.len()];
            let mut i = 0;
            while i < names.len() {
                names[i] = $set[i].as_str();
                i += 1;
            }
            names
        };
        const BYTES: [u8; $crate::ledger::states::set_len(SET, $form)] =
            $crate::ledger::states::set_text(SET, $form);
        const TEXT: &str = $crate::ledger::states::utf8(&BYTES);
        TEXT
    }};
}

/// A statement's text joined at compile time from string constants and literals, so a set of
/// states ([`state_set!`]) can stand in it as the literal the planner must see.
macro_rules! sql {
    ($($part:expr),+ $(,)?) => {{
        const PARTS: &[&str] = &[$($part),+];
        const BYTES: [u8; $crate::ledger::states::joined_len(PARTS)] =
            $crate::ledger::states::joined(PARTS);
        const TEXT: &str = $crate::ledger::states::utf8(&BYTES);
        TEXT
    }};
}

/// The jobs' sets as SQL.
pub(super) const JOBS_TERMINAL: &str = state_set!(JobState::TERMINAL);
pub(super) const JOBS_CANCELLABLE: &str = state_set!(JobState::CANCELLABLE);
pub(super) const JOBS_RENDERED: &str = state_set!(JobState::RENDERED);
/// The claimable jobs as `jobs_due`'s predicate reads (an `OR`, which SQLite matches).
pub(super) const JOBS_CLAIMABLE: &str = state_set!(JobState::CLAIMABLE, any_of "state");
/// The deliveries' unfinished set as SQL.
pub(super) const DELIVERIES_UNFINISHED: &str = state_set!(DeliveryState::UNFINISHED);

#[cfg(test)]
mod tests {
    use super::*;

    fn list<T: Copy>(set: &[T], name: fn(T) -> &'static str) -> String {
        set.iter()
            .map(|s| format!("'{}'", name(*s)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    #[test]
    fn the_sets_as_sql_are_the_sets() {
        assert_eq!(JOBS_TERMINAL, list(JobState::TERMINAL, JobState::as_str));
        assert_eq!(
            JOBS_TERMINAL,
            "'done', 'quarantined', 'cancelled', 'skipped'"
        );
        assert_eq!(
            JOBS_CANCELLABLE,
            list(JobState::CANCELLABLE, JobState::as_str)
        );
        assert_eq!(JOBS_RENDERED, list(JobState::RENDERED, JobState::as_str));
        assert_eq!(JOBS_CLAIMABLE, "state = 'ready' OR state = 'waiting'");
        assert_eq!(
            DELIVERIES_UNFINISHED,
            list(DeliveryState::UNFINISHED, DeliveryState::as_str)
        );
        assert_eq!(
            sql!("a", JOBS_CLAIMABLE, "b"),
            format!("a{JOBS_CLAIMABLE}b")
        );
    }

    /// The states a statement's text names (`'…'` literals that are states).
    fn named(sql: &str) -> std::collections::BTreeSet<&str> {
        sql.split('\'')
            .skip(1)
            .step_by(2)
            .filter(|w| JobState::parse(w).is_ok())
            .collect()
    }

    #[test]
    fn the_live_jobs_arms_are_the_live_set() {
        let live: std::collections::BTreeSet<&str> =
            JobState::LIVE.iter().map(|s| s.as_str()).collect();
        assert_eq!(named(super::super::LIVE_JOB_KEYS), live);
        assert_eq!(named(super::super::LIVE_JOB_NUMBERS), live);
        let claims = super::super::leases::JOB_LEASE;
        for s in JobState::CLAIMABLE {
            let arm = format!("state = '{}'", s.as_str());
            assert!(claims.sqlite.contains(&arm) && claims.postgres.contains(&arm));
        }
    }

    #[test]
    fn live_and_terminal_split_every_job_state() {
        for s in JobState::ALL {
            assert_ne!(
                JobState::LIVE.contains(&s),
                JobState::TERMINAL.contains(&s),
                "{s:?} is live or terminal, not both"
            );
            assert_eq!(JobState::parse(s.as_str()).ok(), Some(s));
        }
        for set in [
            JobState::CLAIMABLE,
            JobState::CANCELLABLE,
            JobState::RENDERED,
        ] {
            assert!(set.iter().all(|s| JobState::ALL.contains(s)));
        }
        assert!(
            JobState::CLAIMABLE
                .iter()
                .all(|s| JobState::LIVE.contains(s))
        );
        for s in DeliveryState::ALL {
            assert_ne!(
                DeliveryState::UNFINISHED.contains(&s),
                s.is_terminal(),
                "{s:?} is unfinished or terminal, not both"
            );
            assert_eq!(DeliveryState::parse(s.as_str()).ok(), Some(s));
        }
    }
}
