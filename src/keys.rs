//! The names of work: a report id, a job key (`report:date`) and a delivery key
//! (`job-key/kind:destination`). They are parsed at the boundary and never rebuilt by hand.

use std::fmt;
use std::str::FromStr;

use chrono::NaiveDate;
use serde::{Serialize, Serializer};

/// A report id: `[a-z0-9][a-z0-9-]*`, at most 63 characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReportId(String);

impl ReportId {
    pub fn parse(s: &str) -> Result<ReportId, String> {
        if s.is_empty() {
            return Err("must not be empty".into());
        }
        if s.len() > 63 {
            return Err(format!("{s:?} is longer than 63 characters"));
        }
        let mut chars = s.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !first_ok
            || !s
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        {
            return Err(format!(
                "{s:?} does not match [a-z0-9][a-z0-9-]* (lowercase letters, digits and '-', starting with a letter or digit)"
            ));
        }
        Ok(ReportId(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ReportId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for ReportId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// One report for one local date: `warehouse-17:2026-10-25`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobKey {
    report: ReportId,
    date: NaiveDate,
}

impl JobKey {
    pub fn new(report: ReportId, date: NaiveDate) -> JobKey {
        JobKey { report, date }
    }

    pub fn report(&self) -> &ReportId {
        &self.report
    }

    pub fn date(&self) -> NaiveDate {
        self.date
    }
}

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.report, self.date.format("%Y-%m-%d"))
    }
}

impl FromStr for JobKey {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (report, date) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?} is not a job key (REPORT:YYYY-MM-DD)"))?;
        let report = ReportId::parse(report)?;
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d")
            .map_err(|_| format!("{s:?}: {date:?} is not a date (YYYY-MM-DD)"))?;
        Ok(JobKey { report, date })
    }
}

impl Serialize for JobKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The kind of a destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DestinationKind {
    Email,
    Webhook,
}

impl DestinationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Email => "email",
            DestinationKind::Webhook => "webhook",
        }
    }

    pub fn parse(s: &str) -> Option<DestinationKind> {
        match s {
            "email" => Some(DestinationKind::Email),
            "webhook" => Some(DestinationKind::Webhook),
            _ => None,
        }
    }
}

/// One destination of one job: `warehouse-17:2026-10-25/email:ops-17@example.com`.
/// A retry reuses it, so it doubles as Message-ID seed and Idempotency-Key.
pub fn delivery_key(job: &JobKey, kind: DestinationKind, destination: &str) -> String {
    format!("{job}/{}:{destination}", kind.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_ids() {
        assert!(ReportId::parse("warehouse-17").is_ok());
        assert!(ReportId::parse("7-eleven").is_ok());
        for bad in ["", "-x", "Warehouse", "a_b", "a b", &"a".repeat(64)] {
            assert!(ReportId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn job_key_round_trips() {
        let k: JobKey = "warehouse-17:2026-10-25".parse().unwrap();
        assert_eq!(k.report().as_str(), "warehouse-17");
        assert_eq!(k.to_string(), "warehouse-17:2026-10-25");
        assert!("warehouse-17:2026-13-01".parse::<JobKey>().is_err());
        assert!("warehouse-17".parse::<JobKey>().is_err());
    }
}
