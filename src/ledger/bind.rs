//! How the keys of [`crate::keys`] bind to SQL: as their text, on every backend that binds a
//! `String`. Here, not in `keys.rs`, so that the names of work know nothing of storage.

use crate::keys::{DeliveryKey, JobKey};

/// Keys bind to SQL as their text, on every backend that binds a `String`.
macro_rules! bind_as_text {
    ($key:ty) => {
        impl<DB: sqlx::Database> sqlx::Type<DB> for $key
        where
            String: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <String as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <String as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $key
        where
            String: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <String as sqlx::Encode<'q, DB>>::encode(self.to_string(), buf)
            }
        }
    };
}

bind_as_text!(JobKey);
bind_as_text!(DeliveryKey);

/// Most keys bound in one statement by [`job_keys_in`]: far below both backends' bind limits.
pub(super) const KEYS_PER_STATEMENT: usize = 500;

/// `head (k1, k2, …)` for the job keys `keys` (at most [`KEYS_PER_STATEMENT`]); `head` ends in
/// `IN (`. What every read of rows by many job keys builds, in a transaction or not.
pub(super) fn job_keys_in<DB>(head: &'static str, keys: &[&JobKey]) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    String: sqlx::Type<DB> + for<'q> sqlx::Encode<'q, DB>,
{
    let mut qb = sqlx::QueryBuilder::new(head);
    let mut list = qb.separated(", ");
    for key in keys {
        list.push_bind(*key);
    }
    qb.push(")");
    qb
}
