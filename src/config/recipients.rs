//! `[recipients]`: what bounces and complaints do to the addresses they name. A hard bounce
//! or a complaint suppresses its address at once; soft bounces count, and `soft_bounces` of
//! them within `soft_bounce_window` suppress it.

use super::ConfigError;
use super::fields::Fields;
use crate::domain::duration::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecipientSettings {
    /// How many soft bounces (4.x.x) within the window suppress an address. Default 3.
    pub soft_bounces: u32,
    /// The window they are counted in. Default 7d.
    pub soft_bounce_window: Span,
}

impl Default for RecipientSettings {
    fn default() -> Self {
        RecipientSettings {
            soft_bounces: 3,
            soft_bounce_window: Span::from_secs(7 * 24 * 3600),
        }
    }
}

/// Reads `[recipients]` into `s`.
pub(super) fn read(
    mut f: Fields<'_, '_>,
    s: &mut RecipientSettings,
    errors: &mut Vec<ConfigError>,
) {
    if let Some(n) = f.opt::<u32>("soft_bounces", errors) {
        if n == 0 {
            errors.push(f.place.error("soft_bounces", "must be at least 1"));
        } else {
            s.soft_bounces = n;
        }
    }
    if let Some(t) = f.positive("soft_bounce_window", errors) {
        s.soft_bounce_window = t;
    }
    f.finish(errors);
}
