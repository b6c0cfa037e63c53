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
