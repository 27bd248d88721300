//! Enums stored as Postgres `text` (the schemas use text with CHECK
//! constraints, not Postgres enum types): each encodes as its `as_str()` and
//! decodes with its `parse`, so a value outside the enum read from the
//! database is an error, never a default. Usable in sqlx's checked macros as
//! `col AS "col: Role"`.

/// `impl sqlx::{Type, Encode, Decode, PgHasArrayType}` for a text-backed enum
/// with `fn as_str(self) -> &'static str` and `fn parse(&str) -> Option<Self>`,
/// for any crate that depends on sqlx (the services' own enums use it too).
#[macro_export]
macro_rules! sqlx_text_enum {
    ($t:ty, $what:literal) => {
        impl sqlx::Type<sqlx::Postgres> for $t {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <str as sqlx::Type<sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        impl sqlx::postgres::PgHasArrayType for $t {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }

        impl<'q> sqlx::Encode<'q, sqlx::Postgres> for $t {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<'q, sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $t {
            fn decode(
                value: sqlx::postgres::PgValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                let s = <&str as sqlx::Decode<'r, sqlx::Postgres>>::decode(value)?;
                <$t>::parse(s).ok_or_else(|| format!("not a {}: {s:?}", $what).into())
            }
        }
    };
}

/// [`sqlx_text_enum!`] when this crate is built with its `sqlx` feature.
macro_rules! sqlx_text {
    ($t:ty, $what:literal) => {
        #[cfg(feature = "sqlx")]
        $crate::sqlx_text_enum!($t, $what);
    };
}

pub(crate) use sqlx_text;
