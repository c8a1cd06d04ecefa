//! Looking keys up by their file and environment names. The keys themselves
//! are declared once, in `schema.rs`.

use std::fmt;

pub use super::schema::Key;

impl Key {
    /// The key with this exact dotted name (names are case-sensitive, as in
    /// the Pi extension's files).
    pub fn from_name(name: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|key| key.name() == name)
    }

    /// The key with this exact environment variable name.
    pub fn from_env_var(var: &str) -> Option<Key> {
        Key::ALL.into_iter().find(|key| key.env_var() == var)
    }

    /// A key whose name differs from `name` only in letter case; used to
    /// suggest the intended key in an unknown-key warning.
    pub fn case_insensitive_match(name: &str) -> Option<Key> {
        Key::ALL
            .into_iter()
            .find(|key| key.name().eq_ignore_ascii_case(name))
    }

    /// True when `prefix` names a section (or other strict prefix) of some
    /// key, so a nested object under it is walked rather than rejected.
    pub(crate) fn is_section_path(prefix: &str) -> bool {
        Key::ALL.into_iter().any(|key| {
            key.name()
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('.'))
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_env_vars_round_trip_and_are_unique() {
        for key in Key::ALL {
            assert_eq!(Key::from_name(key.name()), Some(key));
            assert_eq!(Key::from_env_var(key.env_var()), Some(key));
        }
        let mut names: Vec<_> = Key::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Key::ALL.len());
    }

    /// `LayeredConfig` indexes its origins by `key as usize`.
    #[test]
    fn all_lists_keys_in_declaration_order() {
        for (index, key) in Key::ALL.into_iter().enumerate() {
            assert_eq!(key as usize, index, "{key}");
        }
    }

    #[test]
    fn sections_are_the_prefixes_of_keys() {
        for section in ["freshness", "cgc", "lifecycle", "service", "supervisor"] {
            assert!(Key::is_section_path(section), "{section}");
        }
        assert!(!Key::is_section_path("fresh"));
        assert!(!Key::is_section_path("freshness.watch"));
    }

    #[test]
    fn case_insensitive_match_suggests_the_real_key() {
        assert_eq!(
            Key::case_insensitive_match("freshness.watcherlivenessms"),
            Some(Key::FreshnessWatcherLivenessMs)
        );
        assert_eq!(Key::from_name("freshness.watcherlivenessms"), None);
    }
}
