//! Enums stored as Postgres `text` (the schemas use text with CHECK
//! constraints, not Postgres enum types): each encodes as its `as_str()` and
//! decodes with its `parse`, so a value outside the enum read from the
//! database is an error, never a default. Usable in sqlx's checked macros as
//! `col AS "col: Role"`.
//!
//! A service declares such an enum once with [`text_enum!`]: its variants and
//! their names, from which the serde names, `as_str`, `parse`, `ALL`,
//! `Display`, [`TextEnum`] and the sqlx impls all follow.

/// What every [`text_enum!`] has: its values and their names, for code that
/// works on any of them (a request parameter's 400 naming the values, a
/// setting refused at start).
pub trait TextEnum: Copy + Sized + 'static {
    /// What a value is, for messages ("invite status").
    const WHAT: &'static str;
    /// Every value, in declaration order.
    const ALL: &'static [Self];
    /// The value's name, as serialized and stored.
    fn name(self) -> &'static str;

    /// The value named `s`, or None.
    fn from_name(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }

    /// The names, comma separated ("pending, accepted, revoked").
    fn names() -> String {
        Self::ALL
            .iter()
            .map(|v| v.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The message for `s`, which is none of the names: `fulfilment must be
    /// one of api, manual (not "robot")` (the value cut to 64 characters).
    fn not_one_of(s: &str) -> String {
        let cut: String = s.chars().take(64).collect();
        format!(
            "{} must be one of {} (not {cut:?})",
            Self::WHAT,
            Self::names()
        )
    }
}

/// A text-backed enum: `pub enum Status: "invite status" { Pending =
/// "pending", .. }` declares the enum (Debug, Clone, Copy, Eq, Ord, Hash,
/// Serialize and Deserialize by the given names; any other name is refused
/// with [`TextEnum::not_one_of`]), `ALL`, `as_str`, `parse`,
/// `Display`, [`TextEnum`] and, through [`sqlx_text_enum!`], its strict sqlx
/// impls. The calling crate depends on `serde` and `sqlx`.
///
/// ```ignore
/// hub_domain::text_enum! {
///     /// Where an invite stands.
///     pub enum Status: "invite status" {
///         Pending = "pending",
///         Accepted = "accepted",
///     }
/// }
/// ```
#[macro_export]
macro_rules! text_enum {
    // The enum without the sqlx impls (hub_domain's own enums, whose sqlx
    // impls hang on its `sqlx` feature).
    (@enum $(#[$m:meta])* $vis:vis enum $name:ident: $what:literal {
        $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)?
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $s)] $v),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];

            /// The value's name, as serialized and stored.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }

            /// The value named `s`, or None.
            pub fn parse(s: &str) -> Option<$name> {
                match s {
                    $($s => Some($name::$v),)+
                    _ => None,
                }
            }
        }

        impl $crate::TextEnum for $name {
            const WHAT: &'static str = $what;
            const ALL: &'static [$name] = $name::ALL;
            fn name(self) -> &'static str {
                self.as_str()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        /// One of the names, else an error naming them all.
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(d)?;
                $name::parse(&s).ok_or_else(|| {
                    <D::Error as serde::de::Error>::custom(
                        <$name as $crate::TextEnum>::not_one_of(&s),
                    )
                })
            }
        }
    };
    ($(#[$m:meta])* $vis:vis enum $name:ident: $what:literal {
        $($(#[$vm:meta])* $v:ident = $s:literal),+ $(,)?
    }) => {
        $crate::text_enum!(@enum $(#[$m])* $vis enum $name: $what {
            $($(#[$vm])* $v = $s),+
        });
        $crate::sqlx_text_enum!($name, $what);
    };
}

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
