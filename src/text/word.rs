//! Words stored and printed for fixed choices (a status, an agent, a stop
//! reason): the one macro that declares such an enum, and the error of a
//! word that is none of its values. Its own room, so every module with such
//! an enum (runs, budgets, presets, adapters) leans on it and on nothing
//! else.

/// Declares a fieldless enum stored and printed as a fixed snake_case word;
/// `as "noun"` is how messages name it (`unknown status 'done'`).
macro_rules! word_enum {
    ($(#[$meta:meta])* pub enum $name:ident as $noun:literal { $($(#[$vmeta:meta])* $variant:ident = $word:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word)] $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stored word.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word,)+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = crate::text::word::UnknownWord;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($word => Ok($name::$variant),)+
                    _ => Err(crate::text::word::UnknownWord {
                        kind: $noun,
                        word: s.to_string(),
                        expected: [$($word),+].join(", "),
                    }),
                }
            }
        }
    };
}
pub(crate) use word_enum;

/// A word that is not one of an enum's values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} '{word}' (expected one of: {expected})")]
pub struct UnknownWord {
    /// What the word was meant to be (`status`, `agent`).
    pub kind: &'static str,
    /// What was given.
    pub word: String,
    /// The accepted words.
    pub expected: String,
}
