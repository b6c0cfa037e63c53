//! Whether a rendered job is sent when its report sends only on a change (`send_when =
//! "changed"`) or on an alert (`send_when = "alert"`): a pure decision over what this job's data
//! holds ([`Facts`]) and what the report's earlier jobs decided ([`Earlier`]). The ledger makes
//! it inside the transaction that records the render, so it is made once per job.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::data_path::DataPath;
use super::duration::Span;

/// A report's rule for sending, beyond "always" and "results".
#[derive(Debug, Clone, PartialEq)]
pub enum Rule {
    /// Sent when the source data differs from the last delivered job's.
    Changed,
    /// Sent when the alert's condition starts to hold, while it holds (as `repeat` says), and
    /// once when it stops holding (`recovery`).
    Alert(Alert),
}

impl Rule {
    /// The word stored with each decision: `changed` or `alert`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Rule::Changed => "changed",
            Rule::Alert(_) => "alert",
        }
    }
}

/// `[report.alert]`: a number in the data and the bounds it must stay within.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub value: DataPath,
    pub above: Option<f64>,
    pub below: Option<f64>,
    pub repeat: Repeat,
    pub recovery: bool,
}

/// How often a report is sent while its alert holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Only when it starts to hold.
    Never,
    /// Every run while it holds.
    EveryRun,
    /// Again once this long has passed since the last alert sent.
    Every(Span),
}

/// What a job's data holds for its rule: the data's fingerprint (sha256 of its canonical JSON)
/// and, for an alert, the value at its path.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub fingerprint: String,
    pub value: Option<f64>,
}

impl Facts {
    /// The facts of `data` under `rule`; for an alert, an error naming the path and what was
    /// found there when it is not a number.
    pub fn of(rule: &Rule, data: &Value) -> Result<Facts, String> {
        let fingerprint = hex::encode(Sha256::digest(data.to_string().as_bytes()));
        let value = match rule {
            Rule::Changed => None,
            Rule::Alert(a) => Some(number_at(&a.value, data)?),
        };
        Ok(Facts { fingerprint, value })
    }
}

/// The number at `path`, or what stands there instead.
fn number_at(path: &DataPath, data: &Value) -> Result<f64, String> {
    let found = match path.resolve(data) {
        Some(Value::Number(n)) => return n.as_f64().ok_or_else(|| format!("{path} is {n}")),
        None => "missing".to_string(),
        Some(Value::Null) => "null".to_string(),
        Some(Value::String(s)) => format!("the string {s:?}"),
        Some(Value::Bool(b)) => format!("{b}"),
        Some(Value::Array(_)) => "a list".to_string(),
        Some(Value::Object(_)) => "an object".to_string(),
    };
    Err(format!(
        "the alert's value {path} is not a number: found {found}"
    ))
}

/// What the report's earlier jobs (of earlier dates) decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Earlier {
    /// The last job sent and delivered: its key and its data's fingerprint.
    pub delivered: Option<(String, String)>,
    /// The alert's state after the latest decided job.
    pub alert: Option<AlertState>,
}

/// An alert's state after a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct AlertState {
    pub triggered: bool,
    /// The job whose decision began this state.
    pub since: String,
    /// While triggered: when an alert of this state was last sent.
    pub alerted_at: Option<DateTime<Utc>>,
    pub value: Option<f64>,
}

/// What happened to a job under its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The report's first decided job: sent.
    First,
    Changed,
    Unchanged,
    /// The condition started to hold: sent.
    Triggered,
    /// The condition holds as before: sent again (`repeat`) or not.
    Reminded,
    StillTriggered,
    /// The condition stopped holding: sent when `recovery`.
    Recovered,
    /// The condition does not hold, as before.
    Ok,
}

impl Event {
    pub fn as_str(self) -> &'static str {
        match self {
            Event::First => "first",
            Event::Changed => "changed",
            Event::Unchanged => "unchanged",
            Event::Triggered => "triggered",
            Event::Reminded => "reminded",
            Event::StillTriggered => "still_triggered",
            Event::Recovered => "recovered",
            Event::Ok => "ok",
        }
    }
}

/// A decision: whether the job is sent, what happened, in words, and the alert's state after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub send: bool,
    pub event: Event,
    /// "alert triggered, value 23 > 20", "unchanged since w17:2026-12-05".
    pub words: String,
    pub alert: Option<AlertState>,
}

/// Decides job `key` (its data's `facts`) under `rule`, after `earlier`, at `now`.
pub fn decide(
    rule: &Rule,
    facts: &Facts,
    earlier: &Earlier,
    key: &str,
    now: DateTime<Utc>,
) -> Decision {
    match rule {
        Rule::Changed => changed(facts, earlier),
        Rule::Alert(a) => alert(a, facts.value.unwrap_or(f64::NAN), earlier, key, now),
    }
}

fn changed(facts: &Facts, earlier: &Earlier) -> Decision {
    let (send, event, words) = match &earlier.delivered {
        None => (true, Event::First, "first run of the report".to_string()),
        Some((since, fp)) if *fp == facts.fingerprint => {
            (false, Event::Unchanged, format!("unchanged since {since}"))
        }
        Some((since, _)) => (true, Event::Changed, format!("changed since {since}")),
    };
    Decision {
        send,
        event,
        words,
        alert: None,
    }
}

fn alert(a: &Alert, value: f64, earlier: &Earlier, key: &str, now: DateTime<Utc>) -> Decision {
    let before = earlier.alert.as_ref().filter(|s| s.triggered);
    let breach = breach(a, value);
    let shown = number(value);
    let was = |s: &AlertState| match s.value {
        Some(v) if v != value => format!(" (was {})", number(v)),
        _ => String::new(),
    };
    let state = |triggered, since: &str, alerted_at| {
        Some(AlertState {
            triggered,
            since: since.to_string(),
            alerted_at,
            value: Some(value),
        })
    };
    match (before, breach) {
        (None, Some(why)) => Decision {
            send: true,
            event: Event::Triggered,
            words: format!("alert triggered, value {why}"),
            alert: state(true, key, Some(now)),
        },
        (Some(s), Some(why)) => {
            let remind = match a.repeat {
                Repeat::Never => false,
                Repeat::EveryRun => true,
                Repeat::Every(span) => s
                    .alerted_at
                    .is_none_or(|at| super::clock::add(at, span.as_chrono()) <= now),
            };
            let (event, alerted_at) = match remind {
                true => (Event::Reminded, Some(now)),
                false => (Event::StillTriggered, s.alerted_at),
            };
            let verb = if remind {
                "alert still triggered (reminder)"
            } else {
                "alert still triggered"
            };
            Decision {
                send: remind,
                event,
                words: format!("{verb} since {}, value {why}{}", s.since, was(s)),
                alert: state(true, &s.since, alerted_at),
            }
        }
        (Some(_), None) => Decision {
            send: a.recovery,
            event: Event::Recovered,
            words: match a.recovery {
                true => format!("recovered, value {shown}"),
                false => format!("recovered, value {shown} (recovery = false: not sent)"),
            },
            alert: state(false, key, None),
        },
        (None, None) => {
            let since = earlier.alert.as_ref().map_or(key, |s| s.since.as_str());
            Decision {
                send: false,
                event: Event::Ok,
                words: format!("alert ok since {since}, value {shown}"),
                alert: state(false, since, None),
            }
        }
    }
}

impl Alert {
    /// What a sent decision's subject and chat message lead with: "Alert: orders_late 23 > 20",
    /// "Alert still on: …", "Recovered: orders_late 12"; `None` for a decision that marks
    /// nothing.
    pub fn headline(&self, d: &Decision) -> Option<String> {
        let value = d.alert.as_ref()?.value?;
        let name = self.value.to_string();
        let name = name.rsplit('.').next().unwrap_or("value").to_string();
        let why = breach(self, value).unwrap_or_else(|| number(value));
        match d.event {
            Event::Triggered => Some(format!("Alert: {name} {why}")),
            Event::Reminded => Some(format!("Alert still on: {name} {why}")),
            Event::Recovered => Some(format!("Recovered: {name} {why}")),
            _ => None,
        }
    }

    /// The alert as the render's context gives it templates: the event, the value, the bounds,
    /// the decision in words and the headline.
    pub fn context(&self, d: &Decision) -> Value {
        serde_json::json!({
            "event": d.event.as_str(),
            "triggered": d.alert.as_ref().is_some_and(|a| a.triggered),
            "value": d.alert.as_ref().and_then(|a| a.value),
            "above": self.above,
            "below": self.below,
            "words": d.words,
            "headline": self.headline(d),
        })
    }
}

/// How `value` passes a bound, in words ("23 > 20"), if it does.
fn breach(a: &Alert, value: f64) -> Option<String> {
    if let Some(above) = a.above.filter(|b| value > *b) {
        return Some(format!("{} > {}", number(value), number(above)));
    }
    let below = a.below.filter(|b| value < *b)?;
    Some(format!("{} < {}", number(value), number(below)))
}

/// A number as a person writes it: `23`, `0.25`.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return "not a number".to_string();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(repeat: Repeat, recovery: bool) -> Rule {
        Rule::Alert(Alert {
            value: "data.late".parse().expect("path"),
            above: Some(20.0),
            below: None,
            repeat,
            recovery,
        })
    }

    fn at(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + h * 3600, 0).expect("instant")
    }

    /// Runs `values` through `rule` one job a day, each decision the next one's `earlier`.
    fn life(rule: &Rule, values: &[f64]) -> Vec<Decision> {
        let mut earlier = Earlier::default();
        let mut out = Vec::new();
        for (day, v) in values.iter().enumerate() {
            let data = serde_json::json!({ "late": v });
            let facts = Facts::of(rule, &data).expect("a number");
            let key = format!("r:2027-01-{:02}", day + 1);
            let d = decide(rule, &facts, &earlier, &key, at(24 * day as i64));
            earlier.alert = d.alert.clone();
            out.push(d);
        }
        out
    }

    #[test]
    fn an_alert_is_sent_on_each_transition_and_not_while_it_holds() {
        let got = life(
            &rule(Repeat::Never, true),
            &[5.0, 23.0, 23.0, 30.0, 12.0, 11.0],
        );
        let sent: Vec<bool> = got.iter().map(|d| d.send).collect();
        assert_eq!(sent, [false, true, false, false, true, false]);
        assert_eq!(got[1].words, "alert triggered, value 23 > 20");
        assert_eq!(
            got[2].words,
            "alert still triggered since r:2027-01-02, value 23 > 20"
        );
        assert_eq!(
            got[3].words,
            "alert still triggered since r:2027-01-02, value 30 > 20 (was 23)"
        );
        assert_eq!(got[4].words, "recovered, value 12");
        assert_eq!(got[5].words, "alert ok since r:2027-01-05, value 11");
    }

    #[test]
    fn repeat_every_run_or_after_a_span_reminds_and_recovery_false_stays_quiet() {
        let every = life(&rule(Repeat::EveryRun, false), &[23.0, 23.0, 23.0, 1.0]);
        let sent: Vec<bool> = every.iter().map(|d| d.send).collect();
        assert_eq!(sent, [true, true, true, false]);
        assert_eq!(every[3].event, Event::Recovered);
        let span = "2d".parse().expect("span");
        let spaced = life(
            &rule(Repeat::Every(span), true),
            &[23.0, 23.0, 23.0, 23.0, 23.0],
        );
        let sent: Vec<bool> = spaced.iter().map(|d| d.send).collect();
        assert_eq!(sent, [true, false, true, false, true]);
    }

    #[test]
    fn below_bounds_hold_too_and_a_value_that_is_no_number_is_named() {
        let band = Rule::Alert(Alert {
            value: "data.late".parse().expect("path"),
            above: Some(20.0),
            below: Some(2.5),
            repeat: Repeat::Never,
            recovery: true,
        });
        assert_eq!(
            life(&band, &[1.0])[0].words,
            "alert triggered, value 1 < 2.5"
        );
        let bad = Facts::of(&band, &serde_json::json!({"late": "12"}));
        assert_eq!(
            bad,
            Err("the alert's value data.late is not a number: found the string \"12\"".into())
        );
        let gone = Facts::of(&band, &serde_json::json!({}));
        assert_eq!(
            gone,
            Err("the alert's value data.late is not a number: found missing".into())
        );
    }

    #[test]
    fn changed_sends_the_first_run_then_only_a_different_fingerprint() {
        let facts = |v| Facts::of(&Rule::Changed, &serde_json::json!({ "n": v })).expect("facts");
        let none = Earlier::default();
        assert_eq!(
            decide(&Rule::Changed, &facts(1), &none, "r:1", at(0)).event,
            Event::First
        );
        let before = Earlier {
            delivered: Some(("r:1".into(), facts(1).fingerprint)),
            alert: None,
        };
        let same = decide(&Rule::Changed, &facts(1), &before, "r:2", at(1));
        assert_eq!(
            (same.send, same.words.as_str()),
            (false, "unchanged since r:1")
        );
        let other = decide(&Rule::Changed, &facts(2), &before, "r:2", at(1));
        assert_eq!((other.send, other.event), (true, Event::Changed));
    }
}
