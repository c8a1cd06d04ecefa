//! A path as one POSIX shell word, for a command a shell runs (Claude
//! Code's hook and status line commands) or a person copies (the commands
//! `install` prints).

use std::path::Path;

/// `path` as one shell word: as it is when every character is plain,
/// else in single quotes (an inner `'` written `'\''`).
pub fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-=:,@%".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_path_that_needs_it_is_quoted() {
        assert_eq!(
            shell_word(Path::new("/usr/bin/cgc-fresh")),
            "/usr/bin/cgc-fresh"
        );
        assert_eq!(shell_word(Path::new("/home/a b")), "'/home/a b'");
        assert_eq!(shell_word(Path::new("/it's")), "'/it'\\''s'");
        assert_eq!(shell_word(Path::new("")), "''");
    }
}
