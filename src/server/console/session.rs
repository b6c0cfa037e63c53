//! Console sessions. A login with the ops token or the viewer token sets a cookie naming the
//! role and its expiry, signed with that role's token (HMAC-SHA256): any node with the same
//! tokens accepts it, a restart keeps it, and rotating a token ends every session it signed.
//! The CSRF token of a session is a second MAC of the cookie, so forms need no server state.

use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "dawnpost_session";

/// How long a login lasts.
pub(crate) const SESSION_SECS: i64 = 12 * 60 * 60;

/// What a session may do: an operator redrives and cancels; a viewer only reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Operator,
    Viewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::Viewer => "viewer",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        match s {
            "operator" => Some(Role::Operator),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }
}

/// The two login tokens, from the environment variables `[server]` names.
#[derive(Clone, Default)]
pub struct Tokens {
    pub ops: Option<String>,
    pub viewer: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("ops", &self.ops.as_ref().map(|_| "***"))
            .field("viewer", &self.viewer.as_ref().map(|_| "***"))
            .finish()
    }
}

/// A signed-in operator or viewer, and the CSRF token its forms carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub role: Role,
    pub csrf: String,
}

impl Tokens {
    /// Whether any login is possible.
    pub fn any(&self) -> bool {
        self.ops.is_some() || self.viewer.is_some()
    }

    fn of(&self, role: Role) -> Option<&str> {
        match role {
            Role::Operator => self.ops.as_deref(),
            Role::Viewer => self.viewer.as_deref(),
        }
        .filter(|t| !t.is_empty())
    }

    /// The role a token given at the login form logs in as (compared in constant time).
    pub fn login(&self, given: &str) -> Option<Role> {
        [Role::Operator, Role::Viewer].into_iter().find(|role| {
            self.of(*role)
                .is_some_and(|t| bool::from(t.as_bytes().ct_eq(given.as_bytes())))
        })
    }

    /// The cookie value of a new session: `role.expires.mac`.
    pub fn issue(&self, role: Role, now: DateTime<Utc>) -> Option<String> {
        let token = self.of(role)?;
        let expires = now.timestamp().saturating_add(SESSION_SECS).to_string();
        let signed = format!("{}.{expires}", role.as_str());
        Some(format!("{signed}.{}", mac(token, "session", &signed)))
    }

    /// The session a cookie value carries, if its MAC is right and it has not expired.
    pub fn verify(&self, cookie: &str, now: DateTime<Utc>) -> Option<Session> {
        let (signed, tag) = cookie.rsplit_once('.')?;
        let (role, expires) = signed.split_once('.')?;
        let role = Role::parse(role)?;
        let token = self.of(role)?;
        let expected = mac(token, "session", signed);
        if !bool::from(expected.as_bytes().ct_eq(tag.as_bytes())) {
            return None;
        }
        let expires: i64 = expires.parse().ok()?;
        if now.timestamp() >= expires {
            return None;
        }
        Some(Session {
            role,
            csrf: mac(token, "csrf", cookie),
        })
    }
}

impl Session {
    /// Whether a form's CSRF field is this session's (constant time).
    pub(crate) fn csrf_ok(&self, given: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(given.as_bytes()))
    }
}

/// HMAC-SHA256 of `purpose` and `message` under `key`, hex.
fn mac(key: &str, purpose: &str, message: &str) -> String {
    // An HMAC key may have any length: this cannot fail.
    let Ok(mut m) = <Hmac<Sha256> as KeyInit>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    m.update(purpose.as_bytes());
    m.update(b"\0");
    m.update(message.as_bytes());
    hex::encode(m.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn tokens() -> Tokens {
        Tokens {
            ops: Some("ops-secret".into()),
            viewer: Some("view-secret".into()),
        }
    }

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0)
            .single()
            .expect("time")
    }

    #[test]
    fn a_token_logs_in_as_its_role_and_the_cookie_carries_it() {
        let t = tokens();
        assert_eq!(t.login("ops-secret"), Some(Role::Operator));
        assert_eq!(t.login("view-secret"), Some(Role::Viewer));
        assert_eq!(t.login("ops-secre"), None);
        assert_eq!(t.login(""), None);
        let cookie = t.issue(Role::Viewer, now()).expect("cookie");
        let s = t.verify(&cookie, now()).expect("valid");
        assert_eq!(s.role, Role::Viewer);
        assert!(s.csrf_ok(&s.csrf));
        assert!(!s.csrf_ok("x"));
    }

    #[test]
    fn a_forged_expired_or_rotated_cookie_is_refused() {
        let t = tokens();
        let cookie = t.issue(Role::Viewer, now()).expect("cookie");
        // Claiming the other role with the same MAC.
        let forged = cookie.replacen("viewer", "operator", 1);
        assert_eq!(t.verify(&forged, now()), None);
        // A later expiry with the old MAC.
        let (signed, tag) = cookie.rsplit_once('.').expect("shape");
        let (role, _) = signed.split_once('.').expect("shape");
        assert_eq!(t.verify(&format!("{role}.99999999999.{tag}"), now()), None);
        let later = now() + chrono::Duration::seconds(SESSION_SECS);
        assert_eq!(t.verify(&cookie, later), None, "expired");
        let rotated = Tokens {
            viewer: Some("new-view-secret".into()),
            ..tokens()
        };
        assert_eq!(rotated.verify(&cookie, now()), None, "token rotated");
        let unset = Tokens {
            viewer: None,
            ..tokens()
        };
        assert_eq!(
            unset.verify(&cookie, now()),
            None,
            "role no longer configured"
        );
        assert_eq!(t.verify("garbage", now()), None);
    }

    #[test]
    fn an_unset_or_empty_token_logs_nobody_in() {
        let t = Tokens {
            ops: Some(String::new()),
            viewer: None,
        };
        assert_eq!(t.login(""), None);
        assert!(t.issue(Role::Operator, now()).is_none());
    }
}
