//! Where a report's data comes from, as the configuration holds it. The configuration names no
//! kind of source: each kind reads its own keys of a report's `source` table through a
//! [`SourceConfig`] its caller hands [`super::Config::load`] in [`super::Readers`], and keeps
//! what it read as its own settings in the report's [`SourceSpec`].

use std::any::Any;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::ConfigError;
use super::fields::Fields;
use crate::domain::duration::Span;

/// How one kind of source is configured: the keys of a `source` table it owns.
pub trait SourceConfig: Sync {
    /// Its name: the table's `kind`.
    fn kind(&self) -> &'static str;

    /// Reads its keys of a `source` table (all but `kind` and `limit`): its settings, or
    /// `None` with each problem an error of `f`'s place naming the key.
    fn read(
        &self,
        f: &mut Fields<'_, '_>,
        ctx: &SourceContext<'_>,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec>;

    /// Whether it can say when a window's data is ready (`ready_when = { kind = … }`).
    fn probes(&self) -> bool {
        false
    }

    /// Reads its keys of a `ready_when` table (all but `kind`, `every` and `timeout`): how it
    /// asks whether a window's data is there. Asked only of a kind that [`probes`](Self::probes).
    fn read_probe(
        &self,
        _f: &mut Fields<'_, '_>,
        _ctx: &SourceContext<'_>,
        _errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        None
    }
}

/// What a kind may ask of the configuration while it reads its keys.
pub struct SourceContext<'a> {
    /// What relative paths are resolved against.
    pub root: &'a Path,
    /// Why the JSON file at a path is unusable, if it is (each file read once per load).
    pub json_file_problem: &'a dyn Fn(&Path) -> Option<String>,
}

/// One kind's settings of a report's source, as it read them.
pub trait SourceSettings: fmt::Debug + Send + Sync + Any {
    /// The kind that read them.
    fn kind(&self) -> &'static str;

    /// The longest a fetch may take by the source's own setting; `None` (the default) for a
    /// kind the lease alone bounds (a file) and for a probe (its `timeout` is the table's).
    fn timeout(&self) -> Option<Span> {
        None
    }

    /// The file `check` renders the report's template against when the report names no
    /// `sample`: a file source's own file; none for other kinds.
    fn sample(&self) -> Option<&Path> {
        None
    }

    fn as_any(&self) -> &dyn Any;

    /// Whether `other` is the same settings (a reload keeps a report whose source is the same).
    fn same(&self, other: &dyn SourceSettings) -> bool;
}

/// [`SourceSettings::same`] for settings that compare with `==`.
pub fn same_settings<T: PartialEq + 'static>(me: &T, other: &dyn SourceSettings) -> bool {
    other.as_any().downcast_ref::<T>() == Some(me)
}

/// A report's source, or its readiness probe: its kind's settings.
#[derive(Clone)]
pub struct SourceSpec(Arc<dyn SourceSettings>);

impl SourceSpec {
    pub fn new(settings: impl SourceSettings) -> SourceSpec {
        SourceSpec(Arc::new(settings))
    }

    pub fn kind(&self) -> &'static str {
        self.0.kind()
    }

    /// See [`SourceSettings::timeout`].
    pub fn timeout(&self) -> Option<Span> {
        self.0.timeout()
    }

    /// See [`SourceSettings::sample`].
    pub fn sample(&self) -> Option<&Path> {
        self.0.sample()
    }

    /// The settings as their kind's own type, if they are of that type.
    pub fn settings<T: 'static>(&self) -> Option<&T> {
        self.0.as_any().downcast_ref::<T>()
    }
}

impl fmt::Debug for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for SourceSpec {
    fn eq(&self, other: &SourceSpec) -> bool {
        self.0.same(&*other.0)
    }
}

impl Eq for SourceSpec {}

/// The kinds' names as a choice in words: `"file", "http" or "sql"`.
pub(super) fn choice<'k>(kinds: impl Iterator<Item = &'k &'k dyn SourceConfig>) -> String {
    let names: Vec<String> = kinds.map(|k| format!("{:?}", k.kind())).collect();
    match names.split_last() {
        None => "none".into(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}
