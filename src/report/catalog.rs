//! The reports in force and their templates, shared by the scheduler, the pool and the server,
//! and replaced whole when the daemon reloads its configuration (SIGHUP; a `[[family]]` whose
//! rows come from a query, at every sweep interval too). A reader takes the set in force once
//! ([`Catalog::current`]) and works with it; a reload never changes a set a reader holds.
//! A report a reload removed makes no new jobs; its ledger rows stay as they are.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};

use crate::config::{Config, Report};
use crate::report::render::{RenderError, Templates};

/// One consistent set of reports and the templates they name.
#[derive(Debug, Default)]
pub struct Reports {
    /// In configuration order.
    pub list: Vec<Arc<Report>>,
    pub by_id: HashMap<String, Arc<Report>>,
    pub templates: HashMap<String, Arc<Templates>>,
    /// The reports a reload added, and when: each starts with its first fire after that
    /// instant, not with the fires `schedule.catch_up` would enqueue for a report at start.
    pub added_at: HashMap<String, DateTime<Utc>>,
}

/// A template that could not be loaded, naming the first report that uses it.
#[derive(Debug, thiserror::Error)]
#[error("report {report}: {source}")]
pub struct CatalogError {
    pub report: String,
    #[source]
    pub source: RenderError,
}

impl Reports {
    /// `config`'s reports, each template loaded once.
    pub fn load(config: &Config) -> Result<Reports, CatalogError> {
        let mut templates = HashMap::new();
        for r in &config.reports {
            if !templates.contains_key(&r.template) {
                let t = Templates::load(&config.root, &r.template, &config.template_parts)
                    .map_err(|source| CatalogError {
                        report: r.id.to_string(),
                        source,
                    })?;
                templates.insert(r.template.clone(), Arc::new(t));
            }
        }
        Ok(Reports {
            list: config.reports.clone(),
            by_id: config.reports_by_id(),
            templates,
            added_at: HashMap::new(),
        })
    }
}

/// The handle every service shares; clones see the same set.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    inner: Arc<RwLock<Arc<Reports>>>,
}

impl Catalog {
    pub fn new(reports: Reports) -> Catalog {
        Catalog {
            inner: Arc::new(RwLock::new(Arc::new(reports))),
        }
    }

    /// `list` without templates: what the scheduler, which renders nothing, needs.
    pub fn of_reports(list: Vec<Arc<Report>>) -> Catalog {
        let by_id = list.iter().map(|r| (r.id.to_string(), r.clone())).collect();
        Catalog::new(Reports {
            list,
            by_id,
            ..Reports::default()
        })
    }

    /// [`Reports::load`] as a catalog.
    pub fn load(config: &Config) -> Result<Catalog, CatalogError> {
        Reports::load(config).map(Catalog::new)
    }

    /// The set in force now.
    pub fn current(&self) -> Arc<Reports> {
        match self.inner.read() {
            Ok(g) => g.clone(),
            // A writer only swaps an Arc: a poisoned lock still holds a whole set.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The report `id` in force now.
    pub fn get(&self, id: &str) -> Option<Arc<Report>> {
        self.current().by_id.get(id).cloned()
    }

    /// Puts `reports` in force; readers holding the previous set keep it.
    pub fn replace(&self, reports: Reports) {
        let new = Arc::new(reports);
        match self.inner.write() {
            Ok(mut g) => *g = new,
            Err(poisoned) => *poisoned.into_inner() = new,
        }
    }
}
