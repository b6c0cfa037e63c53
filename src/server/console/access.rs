//! The console's one access check for what changes anything: every action's handler takes an
//! [`OperatorForm`], which exists only for a request whose form carries this session's CSRF
//! token and whose session is an operator's. A handler cannot forget the check: without the
//! extractor it has no form to act on.

use axum::extract::{Form, FromRequest, Request};
use serde::de::DeserializeOwned;

use super::ConsoleError;
use super::session::{Role, Session};
use crate::server::ServerState;

/// A form that carries the CSRF token of the page it came from.
pub(super) trait CsrfForm {
    fn csrf(&self) -> &str;
}

/// An operator's action's form, checked.
#[derive(Debug)]
pub(super) struct OperatorForm<F>(pub F);

impl<F> FromRequest<ServerState> for OperatorForm<F>
where
    F: DeserializeOwned + Default + CsrfForm + Send,
{
    type Rejection = ConsoleError;

    /// Refuses a form without this session's CSRF token (403), then a viewer's (403). A form
    /// that does not parse is an empty one, refused for its missing token.
    async fn from_request(req: Request, state: &ServerState) -> Result<Self, ConsoleError> {
        // Behind the console's session layer every request has its session.
        let session = req
            .extensions()
            .get::<Session>()
            .cloned()
            .ok_or(ConsoleError::Csrf)?;
        let form = Form::<F>::from_request(req, state)
            .await
            .map(|Form(f)| f)
            .unwrap_or_default();
        if !session.csrf_ok(form.csrf()) {
            return Err(ConsoleError::Csrf);
        }
        if session.role != Role::Operator {
            return Err(ConsoleError::ViewerOnly);
        }
        Ok(OperatorForm(form))
    }
}
