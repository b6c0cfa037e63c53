//! Where a report sends, as the configuration holds it. The configuration names no kind of
//! destination: each kind reads its own keys of a `[[report]]` table (and of its owners) through
//! a [`DestinationConfig`] its caller hands [`super::Config::load`] in [`Readers`], and keeps
//! what it read in the report's [`Destinations`].

use std::any::Any;
use std::sync::Arc;

use super::ConfigError;
use super::fields::Fields;
use super::rows::RowReader;
use crate::domain::keys::DestinationKind;

/// How one kind of destination is configured: the keys of a report it owns.
pub trait DestinationConfig: Sync {
    /// Its name, in delivery keys, the ledger and the configuration.
    fn kind(&self) -> DestinationKind;

    /// Reads its keys of a report's table (`email = [...]`, `[[report.webhook]]`): its
    /// destinations in the order configured, and what its sends need beyond their names. Each
    /// problem is an error of `f`'s place naming the key; absent keys read as no destinations.
    fn read_report(
        &self,
        f: &mut Fields<'_, '_>,
        errors: &mut Vec<ConfigError>,
        warnings: &mut Vec<String>,
    ) -> Read;

    /// The part of a job's artifact it sends, rendered from `templates/<name>.<part>.hbs` when
    /// the report's template has one (a chat message's JSON); none by default.
    fn template_part(&self) -> Option<&'static str> {
        None
    }

    /// Reads its keys of a report's owners (`owners`, `owner_webhook`): who of its kind is told
    /// when the report is late or quarantined. A kind that tells no owners reads nothing, and
    /// a key it would own is an unknown key.
    fn read_owners(
        &self,
        _f: &mut Fields<'_, '_>,
        _errors: &mut Vec<ConfigError>,
        _warnings: &mut Vec<String>,
    ) -> Read {
        Read::default()
    }
}

/// What a kind keeps of a report beyond its destinations' names.
pub(crate) type Detail = Arc<dyn Any + Send + Sync>;

/// What a kind read of one report.
#[derive(Default)]
pub struct Read {
    /// Its destinations, distinct, in the order configured.
    pub to: Vec<String>,
    /// What its sends need beyond the names (a webhook's secret variable, an email's
    /// `List-Unsubscribe`), as the kind keeps it; [`Destinations::detail`] gives it back.
    pub detail: Option<Detail>,
}

/// What a configuration is read with: the kinds of destination, and the reader of the rows of
/// a `[[family]]` whose rows come from a query.
pub struct Readers<'a> {
    pub destinations: Vec<&'a dyn DestinationConfig>,
    /// The kinds of source.
    pub sources: Vec<&'a dyn super::SourceConfig>,
    pub rows: &'a dyn RowReader,
}

/// A report's (or its owners') destinations, each kind's in turn.
#[derive(Clone, Default)]
pub struct Destinations(Vec<(DestinationKind, Vec<String>, Option<Detail>)>);

impl Destinations {
    /// What `kinds` read of one table.
    pub(super) fn read(
        kinds: &[&dyn DestinationConfig],
        mut read: impl FnMut(&dyn DestinationConfig) -> Read,
    ) -> Destinations {
        Destinations(
            (kinds.iter())
                .map(|k| {
                    let Read { to, detail } = read(*k);
                    (k.kind(), to, detail)
                })
                .collect(),
        )
    }

    /// The destinations of `kind`, in the order configured.
    pub fn to(&self, kind: DestinationKind) -> &[String] {
        (self.0.iter())
            .find(|(k, _, _)| *k == kind)
            .map_or(&[], |(_, to, _)| to.as_slice())
    }

    /// What `kind` kept beyond the names, if it kept a `T`.
    pub fn detail<T: Any>(&self, kind: DestinationKind) -> Option<&T> {
        (self.0.iter())
            .find(|(k, _, _)| *k == kind)
            .and_then(|(_, _, d)| d.as_deref())
            .and_then(|d| d.downcast_ref::<T>())
    }

    /// Whether there is no destination of any kind.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|(_, to, _)| to.is_empty())
    }
}

impl std::fmt::Debug for Destinations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(k, to, _)| (k.as_str(), to)))
            .finish()
    }
}
