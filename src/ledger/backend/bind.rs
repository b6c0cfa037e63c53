//! How the keys of [`crate::domain::keys`] bind to SQL: as their text, on every backend that binds a
//! `String`. Here, not in `domain::keys`, so that the names of work know nothing of storage.

use crate::domain::keys::{DeliveryKey, JobKey};

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
pub(in crate::ledger) const KEYS_PER_STATEMENT: usize = 500;

/// `head (k1, k2, …)` for the job keys `keys` (at most [`KEYS_PER_STATEMENT`]); `head` ends in
/// `IN (`. What every read of rows by many job keys builds, in a transaction or not.
pub(in crate::ledger) fn job_keys_in<DB>(
    head: &'static str,
    keys: &[&JobKey],
) -> sqlx::QueryBuilder<DB>
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

/// `items` in chunks of powers of two (the largest that fits first), at most `max` (a power of
/// two) each: a statement over many rows or keys then has one of a few shapes, each prepared
/// once per connection and reused, where a shape per count was a new statement to prepare (and
/// keep in the connection's cache) almost every time.
pub(in crate::ledger) fn shaped<T>(mut items: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    std::iter::from_fn(move || {
        let n = items.len().min(max);
        if n == 0 {
            return None;
        }
        let size = 1usize << (usize::BITS - 1 - n.leading_zeros());
        let (chunk, rest) = items.split_at(size);
        items = rest;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::shaped;

    #[test]
    fn rows_go_in_chunks_of_powers_of_two_largest_first() {
        let rows: Vec<usize> = (0..300).collect();
        let sizes = |n: usize| (shaped(&rows[..n], 128).map(<[usize]>::len)).collect::<Vec<_>>();
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(1), [1]);
        assert_eq!(sizes(7), [4, 2, 1]);
        assert_eq!(sizes(100), [64, 32, 4]);
        assert_eq!(sizes(300), [128, 128, 32, 8, 4]);
        let back: Vec<usize> = shaped(&rows, 128).flatten().copied().collect();
        assert_eq!(back, rows, "every row once, in order");
    }
}
