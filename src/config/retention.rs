//! `retention.toml`: how long finished work is kept, per data class, with per-report overrides
//! chosen by glob over report ids (first match wins).

use std::path::Path;

use globset::{Glob, GlobMatcher};

use super::fields::{Fields, Place, parse_file};
use super::{ConfigError, ConfigErrors};
use crate::domain::duration::Span;

/// How long each class of data outlives the moment its job became terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Default 7d.
    pub artifact: Span,
    /// Default 14d.
    pub diagnostics: Span,
    /// Default 30d; at least `artifact` and `diagnostics`.
    pub ledger: Span,
}

#[derive(Debug, Clone)]
pub struct RetentionOverride {
    pub pattern: String,
    matcher: GlobMatcher,
    pub artifact: Option<Span>,
    pub diagnostics: Option<Span>,
    pub ledger: Option<Span>,
}

#[derive(Debug, Clone)]
pub struct RetentionPolicy {
    pub defaults: Thresholds,
    /// Default 10m.
    pub sweep_every: Span,
    pub overrides: Vec<RetentionOverride>,
}

impl Default for RetentionPolicy {
    fn default() -> Self {
        RetentionPolicy {
            defaults: Thresholds {
                artifact: Span::from_secs(7 * 86_400),
                diagnostics: Span::from_secs(14 * 86_400),
                ledger: Span::from_secs(30 * 86_400),
            },
            sweep_every: Span::from_secs(600),
            overrides: Vec::new(),
        }
    }
}

impl RetentionPolicy {
    /// The thresholds for one report: the first override whose glob matches, over the defaults.
    pub fn for_report(&self, report: &str) -> Thresholds {
        match self.overrides.iter().find(|o| o.matcher.is_match(report)) {
            None => self.defaults,
            Some(o) => Thresholds {
                artifact: o.artifact.unwrap_or(self.defaults.artifact),
                diagnostics: o.diagnostics.unwrap_or(self.defaults.diagnostics),
                ledger: o.ledger.unwrap_or(self.defaults.ledger),
            },
        }
    }

    /// The shortest threshold of any class in the defaults or an override: nothing younger than
    /// this can be due.
    pub fn shortest(&self) -> Span {
        let mut all = vec![
            self.defaults.artifact,
            self.defaults.diagnostics,
            self.defaults.ledger,
        ];
        for o in &self.overrides {
            all.extend([o.artifact, o.diagnostics, o.ledger].into_iter().flatten());
        }
        all.into_iter().min().unwrap_or_default()
    }

    /// Reads and validates a policy file; every problem is reported together.
    pub fn load(file: &Path) -> Result<RetentionPolicy, ConfigErrors> {
        let mut errors = Vec::new();
        let mut policy = RetentionPolicy::default();
        let Some(table) = parse_file(file, &mut errors) else {
            return Err(ConfigErrors(errors));
        };
        let mut f = Fields::new(&table, Place::new(file));
        for (name, slot) in [
            ("artifact", &mut policy.defaults.artifact),
            ("diagnostics", &mut policy.defaults.diagnostics),
            ("ledger", &mut policy.defaults.ledger),
            ("sweep_every", &mut policy.sweep_every),
        ] {
            if let Some(v) = f.positive(name, &mut errors) {
                *slot = v;
            }
        }
        check_order(&f.place, "", policy.defaults, &mut errors);
        match f.raw("override") {
            None => {}
            Some(toml::Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let place = f.place.nested(&format!("override[{i}]"));
                    let toml::Value::Table(t) = item else {
                        errors.push(place.error("(table)", "expected an [[override]] table"));
                        continue;
                    };
                    let mut o = Fields::new(t, place.clone());
                    let pattern = o.req::<String>("reports", &mut errors);
                    let artifact = o.positive("artifact", &mut errors);
                    let diagnostics = o.positive("diagnostics", &mut errors);
                    let ledger = o.positive("ledger", &mut errors);
                    o.finish(&mut errors);
                    let Some(pattern) = pattern else { continue };
                    let matcher = match Glob::new(&pattern) {
                        Ok(g) => g.compile_matcher(),
                        Err(e) => {
                            errors.push(
                                place.error("reports", format!("{pattern:?} is not a glob: {e}")),
                            );
                            continue;
                        }
                    };
                    let ov = RetentionOverride {
                        pattern,
                        matcher,
                        artifact,
                        diagnostics,
                        ledger,
                    };
                    let effective = Thresholds {
                        artifact: ov.artifact.unwrap_or(policy.defaults.artifact),
                        diagnostics: ov.diagnostics.unwrap_or(policy.defaults.diagnostics),
                        ledger: ov.ledger.unwrap_or(policy.defaults.ledger),
                    };
                    check_order(
                        &place,
                        &format!(" (override {:?})", ov.pattern),
                        effective,
                        &mut errors,
                    );
                    policy.overrides.push(ov);
                }
            }
            Some(_) => errors.push(f.place.error("override", "expected [[override]] tables")),
        }
        f.finish(&mut errors);
        if errors.is_empty() {
            Ok(policy)
        } else {
            super::lines::locate(&mut errors);
            Err(ConfigErrors(errors))
        }
    }
}

fn check_order(place: &Place<'_>, what: &str, t: Thresholds, errors: &mut Vec<ConfigError>) {
    // The rows outlive what they describe: retention deletes them last.
    for (name, shorter) in [("artifact", t.artifact), ("diagnostics", t.diagnostics)] {
        if t.ledger < shorter {
            let message = format!(
                "ledger ({}) must be at least {name} ({shorter}){what}",
                t.ledger
            );
            errors.push(place.error("ledger", message));
        }
    }
}
