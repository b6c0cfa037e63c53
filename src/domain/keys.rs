//! The names of work: a report id, a job key (`report:date`) and a delivery key
//! (`job-key/kind:destination`). They are parsed at the boundary and never rebuilt by hand.

use std::fmt;
use std::str::FromStr;

use chrono::NaiveDate;
use serde::{Serialize, Serializer};

use crate::domain::redact::redact_destination;

/// A report id: `[a-z0-9][a-z0-9-]*`, at most 63 characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReportId(String);

impl ReportId {
    pub fn parse(s: &str) -> Result<ReportId, KeyError> {
        if s.is_empty() {
            return Err(KeyError::ReportId("must not be empty".into()));
        }
        if s.len() > 63 {
            return Err(KeyError::ReportId(format!(
                "{s:?} is longer than 63 characters"
            )));
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
            return Err(KeyError::ReportId(format!(
                "{s:?} does not match [a-z0-9][a-z0-9-]* (lowercase letters, digits and '-', starting with a letter or digit)"
            )));
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

/// An `http(s)` URL's `host:port` (lowercase; the scheme's port when none is given).
pub fn host_port(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    Some(format!(
        "{}:{}",
        u.host_str()?.to_ascii_lowercase(),
        u.port_or_known_default()?
    ))
}

/// A local date written `YYYY-MM-DD`, with a four-digit year and nothing else (chrono's `%Y`
/// alone would take `+99999-01-01`).
pub(crate) fn parse_date(s: &str) -> Option<NaiveDate> {
    let b = s.as_bytes();
    let shape = b.len() == 10
        && b.iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        });
    if !shape {
        return None;
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()
}

/// One report for one local date: `warehouse-17:2026-10-25`; a reissued revision of it,
/// `warehouse-17:2026-10-25.r2` (revision 1 has no suffix).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JobKey {
    report: ReportId,
    date: NaiveDate,
    revision: u32,
}

impl JobKey {
    pub fn new(report: ReportId, date: NaiveDate) -> JobKey {
        JobKey {
            report,
            date,
            revision: 1,
        }
    }

    pub fn report(&self) -> &ReportId {
        &self.report
    }

    pub fn date(&self) -> NaiveDate {
        self.date
    }

    /// 1 for the job a fire or a run made; 2, 3, … for each reissue of it.
    pub fn revision(&self) -> u32 {
        self.revision
    }

    /// The key of revision `revision` of this job's report and date.
    pub fn with_revision(&self, revision: u32) -> JobKey {
        JobKey {
            revision: revision.max(1),
            ..self.clone()
        }
    }

    /// The job's own folder in the artifact store, under its report: `2026-10-25`, or
    /// `2026-10-25.r2` for a revision, so each revision's artifact is apart.
    pub fn day(&self) -> String {
        match self.revision {
            1 => IsoDate(self.date).to_string(),
            n => format!("{}.r{n}", IsoDate(self.date)),
        }
    }

    /// The file name of the job's CSV attachment: `warehouse-17-2026-10-25.csv`
    /// (`…-2026-10-25-r2.csv` for a revision).
    pub fn csv_filename(&self) -> String {
        self.filename("csv")
    }

    /// The spreadsheet attachment's file name: the CSV's, `.xlsx`.
    pub fn xlsx_filename(&self) -> String {
        self.filename("xlsx")
    }

    fn filename(&self, ext: &str) -> String {
        match self.revision {
            1 => format!("{}-{}.{ext}", self.report, IsoDate(self.date)),
            n => format!("{}-{}-r{n}.{ext}", self.report, IsoDate(self.date)),
        }
    }
}

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.report, IsoDate(self.date))?;
        if self.revision > 1 {
            write!(f, ".r{}", self.revision)?;
        }
        Ok(())
    }
}

/// `YYYY-MM-DD`, as chrono's `%Y-%m-%d` writes it, without parsing a format string each time:
/// keys are formatted for every statement, log line and delivery.
pub struct IsoDate(pub NaiveDate);

impl fmt::Display for IsoDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use chrono::Datelike;
        let d = self.0;
        if let Ok(year @ 0..=9999) = u16::try_from(d.year()) {
            // Ten ASCII digits and dashes written at once: `write!` with padded integers
            // costs about a thousand instructions a date, and a key is formatted often.
            let digit = |n: u32| b'0' + (n % 10) as u8;
            let (y, m, day) = (u32::from(year), d.month(), d.day());
            let text = [
                digit(y / 1000),
                digit(y / 100),
                digit(y / 10),
                digit(y),
                b'-',
                digit(m / 10),
                digit(m),
                b'-',
                digit(day / 10),
                digit(day),
            ];
            f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
        } else {
            write!(f, "{}", d.format("%Y-%m-%d"))
        }
    }
}

impl FromStr for JobKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (report, date) = s
            .split_once(':')
            .ok_or_else(|| KeyError::NotAJobKey(s.to_string()))?;
        let report = ReportId::parse(report)?;
        let (date, revision) = match date.split_once(".r") {
            None => (date, 1),
            // Canonical digits only (`r2`, never `r02` or `r+2`), so one job has one key.
            Some((date, n)) => match n.parse::<u32>() {
                Ok(v) if v >= 2 && v.to_string() == n => (date, v),
                _ => return Err(KeyError::NotAJobKey(s.to_string())),
            },
        };
        let date = parse_date(date).ok_or_else(|| KeyError::NotADate {
            key: s.to_string(),
            date: date.to_string(),
        })?;
        Ok(JobKey {
            report,
            date,
            revision,
        })
    }
}

impl Serialize for JobKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The longest name of a destination kind.
const KIND_MAX: usize = 15;

/// The kind of a destination, by its name (`email`, `webhook`): lowercase ASCII letters,
/// digits and `_`, at most 15 bytes. The kinds this version sends are those
/// `delivery::destination` registers; a key holds any well-formed name, so a row of a kind
/// this version does not know still reads (its sends then fail, saying so).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DestinationKind {
    len: u8,
    name: [u8; KIND_MAX],
}

impl DestinationKind {
    /// The kind called `name`, for a constant: a malformed name stops the build.
    pub const fn named(name: &str) -> DestinationKind {
        match DestinationKind::of_bytes(name.as_bytes()) {
            Some(kind) => kind,
            None => panic!("a destination kind's name is [a-z0-9_], 1 to 15 bytes"),
        }
    }

    /// The kind a text names, when it is a well-formed name.
    pub fn parse(s: &str) -> Option<DestinationKind> {
        DestinationKind::of_bytes(s.as_bytes())
    }

    const fn of_bytes(b: &[u8]) -> Option<DestinationKind> {
        if b.is_empty() || b.len() > KIND_MAX {
            return None;
        }
        let mut name = [0u8; KIND_MAX];
        let mut i = 0;
        while i < b.len() {
            if !(b[i].is_ascii_lowercase() || b[i].is_ascii_digit() || b[i] == b'_') {
                return None;
            }
            name[i] = b[i];
            i += 1;
        }
        Some(DestinationKind {
            len: b.len() as u8,
            name,
        })
    }

    pub fn as_str(&self) -> &str {
        let name = &self.name[..usize::from(self.len)];
        std::str::from_utf8(name).unwrap_or("")
    }
}

impl Ord for DestinationKind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for DestinationKind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for DestinationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for DestinationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DestinationKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Where a destination is received, for grouping dead letters, by its shape: a URL's
/// `host:port`, an address's domain (lowercase), else the destination as
/// [`redact_destination`] shows it. Not where it is *sent* (an email goes to the relay): that
/// is `delivery::SendTarget`.
pub fn receiver(destination: &str) -> String {
    if destination.contains("://") {
        host_port(destination).unwrap_or_default()
    } else if let Some((_, domain)) = destination.rsplit_once('@') {
        domain.to_ascii_lowercase()
    } else {
        redact_destination(destination)
    }
}

/// One destination of one job: `warehouse-17:2026-10-25/email:ops-17@example.com`.
/// A retry reuses it, so it doubles as Message-ID seed and Idempotency-Key. Its text is the
/// delivery's identity in the ledger; [`DeliveryKey::redacted`] is what a person reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeliveryKey {
    job: JobKey,
    kind: DestinationKind,
    destination: String,
}

impl DeliveryKey {
    pub fn new(job: JobKey, kind: DestinationKind, destination: impl Into<String>) -> DeliveryKey {
        DeliveryKey {
            job,
            kind,
            destination: destination.into(),
        }
    }

    pub fn job(&self) -> &JobKey {
        &self.job
    }

    pub fn kind(&self) -> &DestinationKind {
        &self.kind
    }

    /// The recipient address or webhook URL, in full.
    pub fn destination(&self) -> &str {
        &self.destination
    }

    /// The key safe to log: an email address masked, a URL without its path and query
    /// ([`redact_destination`]).
    pub fn redacted(&self) -> String {
        let destination = redact_destination(&self.destination);
        format!("{}/{}:{destination}", self.job, self.kind.as_str())
    }

    /// [`DeliveryKey::redacted`], made only when printed: a log line its level filters out
    /// does not parse the URL.
    pub(crate) fn shown_lazily(&self) -> Redacted<'_> {
        Redacted(self)
    }
}

/// A delivery key that displays as [`DeliveryKey::redacted`].
#[derive(Debug, Clone, Copy)]
pub struct Redacted<'a>(&'a DeliveryKey);

impl fmt::Display for Redacted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.redacted())
    }
}

impl fmt::Display for DeliveryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}:{}",
            self.job,
            self.kind.as_str(),
            self.destination
        )
    }
}

impl FromStr for DeliveryKey {
    type Err = KeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || KeyError::NotADeliveryKey(s.to_string());
        // A job key holds no '/', so the first one ends it; a URL may hold many.
        let (job, rest) = s.split_once('/').ok_or_else(bad)?;
        let (kind, destination) = rest.split_once(':').ok_or_else(bad)?;
        let kind = DestinationKind::parse(kind).ok_or_else(bad)?;
        if destination.is_empty() {
            return Err(bad());
        }
        Ok(DeliveryKey::new(job.parse()?, kind, destination))
    }
}

impl Serialize for DeliveryKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A key of work (a job's or a delivery's): its text is its identity in the ledger, and
/// [`Key::shown`] is what a log line or an error message may print.
pub trait Key: fmt::Display {
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl Key for JobKey {}

impl Key for DeliveryKey {
    fn shown(&self) -> String {
        self.redacted()
    }
}

/// A key equals the text it displays as (and that text parses back to it).
macro_rules! eq_text {
    ($key:ty) => {
        impl PartialEq<str> for $key {
            fn eq(&self, other: &str) -> bool {
                other.parse::<$key>().is_ok_and(|k| k == *self)
            }
        }

        impl PartialEq<&str> for $key {
            fn eq(&self, other: &&str) -> bool {
                *self == **other
            }
        }

        impl PartialEq<String> for $key {
            fn eq(&self, other: &String) -> bool {
                *self == *other.as_str()
            }
        }
    };
}

eq_text!(JobKey);
eq_text!(DeliveryKey);

/// What a key the ledger or an operator gave does not satisfy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    ReportId(String),
    #[error("{0:?} is not a job key (REPORT:YYYY-MM-DD)")]
    NotAJobKey(String),
    #[error("{key:?}: {date:?} is not a date (YYYY-MM-DD)")]
    NotADate { key: String, date: String },
    #[error("{0:?} is not a delivery key (REPORT:YYYY-MM-DD/KIND:DESTINATION)")]
    NotADeliveryKey(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Datelike;

    #[test]
    fn iso_dates_read_as_chrono_writes_them() {
        for (y, m, d) in [
            (2026, 10, 25),
            (1, 1, 1),
            (999, 12, 31),
            (9999, 2, 28),
            (0, 3, 1),
        ] {
            let date = NaiveDate::from_ymd_opt(y, m, d).expect("date");
            assert_eq!(
                IsoDate(date).to_string(),
                date.format("%Y-%m-%d").to_string()
            );
        }
        for far in [(12345, 1, 2), (-1, 12, 31), (10000, 1, 1)] {
            let far = NaiveDate::from_ymd_opt(far.0, far.1, far.2).expect("date");
            assert_eq!(IsoDate(far).to_string(), far.format("%Y-%m-%d").to_string());
        }
        // Every day of a leap year and the turn of a century, each digit place moving.
        let mut day = NaiveDate::from_ymd_opt(1999, 12, 1).expect("date");
        while day.year() < 2001 {
            assert_eq!(IsoDate(day).to_string(), day.format("%Y-%m-%d").to_string());
            day = day.succ_opt().expect("next day");
        }
    }

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
        assert!("warehouse-17:+99999-01-01".parse::<JobKey>().is_err());
    }

    #[test]
    fn dates_are_four_digit_years_only() {
        assert_eq!(
            parse_date("2026-10-25"),
            NaiveDate::from_ymd_opt(2026, 10, 25)
        );
        for bad in [
            "+99999-01-01",
            "99999-01-01",
            "2026-1-25",
            "2026-10-25 ",
            "2026/10/25",
            "2026-02-30",
            "",
        ] {
            assert_eq!(parse_date(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn delivery_key_round_trips_and_redacts() {
        let s = "warehouse-17:2026-10-25/webhook:https://x.example/a/b:1?c=d";
        let k: DeliveryKey = s.parse().unwrap();
        assert_eq!(k.job().to_string(), "warehouse-17:2026-10-25");
        assert_eq!(k.kind().as_str(), "webhook");
        assert_eq!(k.destination(), "https://x.example/a/b:1?c=d");
        assert_eq!(k.to_string(), s);
        assert_eq!(
            k.redacted(),
            "warehouse-17:2026-10-25/webhook:https://x.example/…",
            "a webhook's path and query (often a token) are not shown"
        );
        let e: DeliveryKey = "w:2026-10-25/email:lead@example.com".parse().unwrap();
        assert_eq!(e.redacted(), "w:2026-10-25/email:l***@example.com");
        let fax: DeliveryKey = "w:2026-10-25/fax:1".parse().unwrap();
        assert_eq!(
            (fax.kind().as_str(), fax.redacted().as_str()),
            ("fax", "w:2026-10-25/fax:1"),
            "any well-formed kind reads; what this version sends is the registry's to say"
        );
        for bad in [
            "w:2026-10-25",
            "w:2026-10-25/Fax:1",
            "w:2026-10-25/a_kind_name_too_long:1",
            "w:2026-10-25/email:",
            "w/email:a@b",
        ] {
            assert!(bad.parse::<DeliveryKey>().is_err(), "{bad:?}");
        }
    }
}
